"""What each turn's model was sent, kept without copying the history: `SentRequest`.

A turn's request is recorded by reference. The messages the agent's history processor
passed on unchanged (found by identity: `sent[i] is history[j]`) are spans of the history
the turn saw, so a turn with no processor keeps one span whatever the history's length; a
message the processor changed or added is kept as sent. The system prompt and the tool
specs are kept once per distinct value in the run's `request_parts`, under keys computed
once per agent.

A parallel branch's turn sees the branch's own history; when the block merges, the run's
history holds the branches' messages in declaration order, so the merge notes on each
branch turn how it moved the positions (`SentRequest.moved`), and `resolve` applies it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from thena_nb.core.records._keys import blake
from thena_nb.core.records.model import ModelRequest, ToolSpec
from thena_nb.core.records.types import HistorySpan, HistoryView, Message, SentRequest, Turn

__all__ = ["capture", "kept", "moved", "rebuild", "resolve"]

_tuple_new = tuple.__new__
_CACHE = "_sent_parts"
"""Where an agent keeps its parts' keys: `[system, specs, system_key, tools_key, tools,
table]`, `table` the last run's `request_parts` they were added to."""


def _part_key(kind: str, data: str) -> str:
    h = blake()
    h.update(data.encode())
    return f"{kind}{h.hexdigest()[:16]}"


def _parts_of(agent: object, sent: ModelRequest) -> list[Any]:
    """The keys of the agent's system prompt and tool specs, computed once per agent (its
    prompt and tools never change; a changed `sent` value is keyed again)."""
    tools = [spec.model_dump(mode="json") for spec in sent.tools]
    specs = "\x1e".join(spec.model_dump_json() for spec in sent.tools)
    cached: list[Any] = [sent.system, sent.tools, _part_key("s", sent.system)]
    cached += [_part_key("t", specs), tools, None]  # None: the last run's table that got them
    agent.__dict__[_CACHE] = cached  # not `setattr`: that would reset the agent's key
    return cached


def capture(
    agent: object, sent: ModelRequest, history: list[Message], parts: dict[str, Any]
) -> SentRequest:
    """The record of `sent`, made from `history` (the history the turn saw); adds the system
    prompt and tool specs to `parts` when they are new. `agent`, the asking agent, keeps its
    parts' keys in its `__dict__`."""
    asked = sent.__dict__  # plain reads: this runs once per turn
    cached = agent.__dict__.get(_CACHE)
    if cached is None or cached[0] is not asked["system"] or cached[1] is not asked["tools"]:
        cached = _parts_of(agent, sent)
    system, tools = cached[2], cached[3]
    if cached[5] is not parts:  # a run's table gets the agent's parts once
        if system not in parts:
            parts[system] = asked["system"]
        if tools not in parts:
            parts[tools] = cached[4]
        cached[5] = parts
    messages = asked["messages"]
    if type(messages) is HistoryView and messages._items is history:
        spans: tuple[HistorySpan | Message, ...] = ((0, messages._length),)
    else:
        spans = _spans(messages, history)
    # Built without validation: this runs once per turn and every value is known good.
    return _tuple_new(SentRequest, (spans, system, tools, asked["max_tokens"], ()))


def _spans(
    messages: Sequence[Message], history: list[Message]
) -> tuple[HistorySpan | Message, ...]:
    """`messages` as spans of `history` where they are its own messages, else as sent.

    Each message is looked for where the last span stops, at its own position and at its
    position counted from the end (a processor that keeps a prefix or a recent window);
    only a message found at none of these makes a map of the history's messages.
    """
    out: list[HistorySpan | Message] = []
    n, k = len(history), len(messages)
    start = stop = -1
    where: dict[int, int] | None = None
    for i, m in enumerate(messages):
        if 0 <= stop < n and history[stop] is m:
            stop += 1
            continue
        j = next((c for c in (i, n - k + i) if 0 <= c < n and history[c] is m), None)
        if j is None:
            if where is None:
                where = {id(h): p for p, h in enumerate(history)}
            j = where.get(id(m))
        if stop >= 0:
            out.append((start, stop))
            start = stop = -1
        if j is None:
            out.append(m)  # changed or added by the processor: kept as sent
        else:
            start, stop = j, j + 1
    if stop >= 0:
        out.append((start, stop))
    return tuple(out)


def kept(recorded: Turn, source: Mapping[str, Any], parts: dict[str, Any]) -> SentRequest | None:
    """A replayed turn's recorded request, in the positions of the history it saw, with its
    parts copied from the recorded run's `source` table into `parts`."""
    request = recorded.request
    if request is None:
        return None
    for key in (request.system, request.tools):
        if key not in parts and key in source:
            parts[key] = source[key]
    if request.moved:
        request = request._replace(moved=())
    return request


def moved(request: SentRequest, start: int, by: int) -> SentRequest:
    """`request` once a merge has moved the positions from `start` on by `by`."""
    return request._replace(moved=(*request.moved, (start, by)))


def moved_spans(request: SentRequest) -> list[HistorySpan | Message]:
    parts: list[HistorySpan | Message] = list(request.messages)
    for start, by in request.moved:
        out: list[HistorySpan | Message] = []
        for part in parts:
            if isinstance(part, Message):
                out.append(part)
                continue
            a, b = part
            if a < start:
                out.append((a, min(b, start)))
            if b > start:
                out.append((max(a, start) + by, b + by))
        parts = out
    return parts


def resolve(request: SentRequest, history: Sequence[Message]) -> list[Message]:
    """The messages `request` stands for, from the run's `history`."""
    out: list[Message] = []
    for part in moved_spans(request):
        if isinstance(part, Message):
            out.append(part)
            continue
        a, b = part
        if b > len(history):
            raise ValueError(
                f"the recorded request refers to history message {b - 1}, but the history "
                f"has {len(history)} messages; was the history changed after the run?"
            )
        out.extend(history[a:b])
    return out


def rebuild(turn: Turn, history: Sequence[Message], parts: Mapping[str, Any]) -> ModelRequest:
    """The `ModelRequest` turn `turn` sent, rebuilt from its record."""
    request = turn.request
    if request is None:
        raise ValueError(
            f"turn {turn.index} has no recorded request (it was recorded before thena_nb kept "
            f"requests); run the workflow again to see what its model is sent"
        )
    missing = [k for k in (request.system, request.tools) if k not in parts]
    if missing:
        raise ValueError(
            f"turn {turn.index}'s request refers to {missing[0]!r}, which the run's "
            f"`request_parts` does not hold; load the run with its parts"
        )
    return ModelRequest(
        agent=turn.agent,
        system=parts[request.system],
        messages=resolve(request, history),
        tools=[ToolSpec.model_validate(spec) for spec in parts[request.tools]],
        max_tokens=request.max_tokens,
        model=turn.model,
    )
