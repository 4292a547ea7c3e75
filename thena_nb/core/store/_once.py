"""A large tool result stored once: in its call, not again in the messages that carry it.

A tool's result is in the turn's `ToolCall` and in the tool message the history gets from
it, and the SQLite store writes both a turn's messages and, when the run ends, the whole
history. A tool message whose content is long (`LONG_CHARS` or more) and equal to its
call's outcome is written with a reference to that call instead (`shrunk`); reading puts
the content back from the call (`expanded`). Short messages are written as they are, so an
ordinary turn costs one length check per tool message.

Example:
    >>> from thena_nb.core.records.types import Message, ToolCall
    >>> call = ToolCall(id="c1", name="read", arguments={}, ok=True, result="x" * LONG_CHARS)
    >>> message = Message(role="tool", content=call.result, tool_call_id="c1")
    >>> small = shrunk([message], {("c1", call.result): 3})
    >>> small[0].content
    '\\x00thena-call:3:c1'
    >>> expanded(small, {(3, "c1"): call})[0] == message
    True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from thena_nb.core.records.types import Message, ToolCall, Turn

__all__ = [
    "LONG_CHARS",
    "MARK",
    "MARK_JSON",
    "calls_of",
    "expanded",
    "outcomes_of",
    "shrunk",
    "stored_messages",
]

LONG_CHARS = 4096
"""Tool messages at least this long are stored as a reference to their call."""
MARK = "\x00thena-call:"
"""How a stored reference starts (`MARK` + turn index + `:` + call id); no tool writes it."""
MARK_JSON = "\\u0000thena-call:"
"""`MARK` as it reads in JSON text: a quick test for whether any message needs `expanded`."""


def apart(text: str) -> bool:
    """Whether a tool message with this content is stored as a reference: a long one, and
    one that begins as a reference does (so that reading it back cannot mistake it)."""
    return len(text) >= LONG_CHARS or text.startswith(MARK)


def outcome(call: ToolCall) -> str:
    """What the tool message of `call` carries (`core/engine/_turn.py` `_add_results`)."""
    return (call.result if call.ok else call.error) or ""


def outcomes_of(turns: Iterable[Turn]) -> dict[tuple[str, str], int]:
    """The turn index of each long outcome, by (call id, outcome): what `shrunk` refers to."""
    out: dict[tuple[str, str], int] = {}
    for turn in turns:
        for call in turn.tool_calls:
            text = outcome(call)
            if apart(text):
                out.setdefault((call.id, text), turn.index)
    return out


def calls_of(turns: Iterable[Turn]) -> dict[tuple[int, str], ToolCall]:
    """Every call by (turn index, call id): what `expanded` reads the contents from."""
    return {(t.index, c.id): c for t in turns for c in t.tool_calls}


def shrunk(messages: Sequence[Message], outcomes: Mapping[tuple[str, str], int]) -> list[Message]:
    """`messages` with each long tool message that repeats a call's outcome as a reference."""
    out = list(messages)
    if not outcomes:
        return out
    for i, m in enumerate(out):
        if m.role == "tool" and m.tool_call_id is not None and apart(m.content):
            index = outcomes.get((m.tool_call_id, m.content))
            if index is not None:
                ref = f"{MARK}{index}:{m.tool_call_id}"
                out[i] = m.model_copy(update={"content": ref})
    return out


def stored_messages(messages: Sequence[Message], turns: Iterable[Turn]) -> Sequence[Message]:
    """`messages` as the store writes them: unchanged unless a tool message is long, then
    `shrunk` against the outcomes of `turns` (the turn that wrote them, or the whole run)."""
    for m in messages:  # plain reads: this runs for every stored turn
        d = m.__dict__
        if d["role"] == "tool":
            text = d["content"]
            if len(text) >= LONG_CHARS or text.startswith(MARK):
                return shrunk(messages, outcomes_of(turns))
    return messages


def expanded(
    messages: Sequence[Message], calls: Mapping[tuple[int, str], ToolCall]
) -> list[Message]:
    """`messages` with every reference `shrunk` wrote replaced by its call's outcome.

    Raises:
        KeyError: A reference names a call that is not stored (a corrupt row).
    """
    out = list(messages)
    for i, m in enumerate(out):
        if m.role == "tool" and m.content.startswith(MARK):
            index, _, call_id = m.content[len(MARK) :].partition(":")
            call = calls[(int(index), call_id)]
            out[i] = m.model_copy(update={"content": outcome(call)})
    return out
