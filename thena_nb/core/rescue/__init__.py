"""Find tool calls that a model wrote as text instead of sending them through the tool channel.

Models served without a matching tool parser, or prompted to use tools in text, write calls
into their answer: a bare JSON object, a ```` ```json ```` fence, `<tool_call>` tags,
`<function=…>` tags, a pythonic `[f(a=1)]` list, Mistral's `[TOOL_CALLS]`, `<invoke>` XML
(also Anthropic's legacy `<tool_name>` form), Qwen3-coder XML, GLM's `<arg_key>`, ReAct
`Action:` lines, transcript lines (`[Calling tool: f with arguments: {…}]`), gpt-oss harmony
messages, Gemma's `call:f{…}`, or
the special tokens of DeepSeek, Kimi, Step-3, Apertus, Cohere, Functionary and Llama 3.1.
`scan_tool_calls` finds them, in text order; the readers are listed in
`thena_nb.core.rescue._formats.FORMATS`.

Text is not a trusted channel, so precision comes first:

- only calls naming one of the given tools count; a call whose arguments do not validate
  is reported apart (`RescueScan.invalid`): the executor runs it as a failed call, so the
  model gets the validation error back;
- reasoning (`<think>…</think>`, `<seed:think>`, harmony's analysis channel, Gemma's
  thought channel), block quotes and code fences in other languages are never read, and a
  call inside inline code (`` `…` ``) is shown, not made, unless the code span is the
  whole reply;
- a call introduced as an example, a template, a refusal or past narration is skipped, and
  so is a call whose values are placeholders (`...`, `<city>`, `CITY`);
- a call cut off before its arguments close is not completed;
- a tool declared with `@tool(rescue=False)` is never run from text: its calls are
  reported in `RescueScan.refused`.

Near-JSON is read by `json.loads` first (with raw newlines allowed in strings), then by a
lenient reader of this package's own that accepts what models get wrong in harmless ways:
single quotes, Python's `True`/`None`, trailing commas, a missing comma, missing closers at
the very end of the reply. It never guesses where a string ends and never turns an
unquoted word into a string, so a repaired call holds only what the model wrote. Nothing is
ever evaluated.

Scanning is linear in the length of the text on any input: every reader makes one pass and
no regex backtracks over unbounded text. The slow readers (the lenient one and `ast.parse`)
only see pieces under 64 KB, and one scan parses at most a few hundred call-shaped pieces
and reads at most 128 KB slowly; past that, only `json.loads` reads, which is linear too.
At most `MAX_CALLS` calls are taken from one text.

Example:
    >>> from thena_nb.core.parts.tools import tool
    >>> @tool
    ... def get_weather(city: str) -> str:
    ...     '''Current weather for a city.'''
    ...     return "sunny"
    >>> text = '<tool_call>{"name": "get_weather", "arguments": {"city": "Lisbon"}}</tool_call>'
    >>> [(c.name, c.arguments) for c in rescue_tool_calls(text, [get_weather])]
    [('get_weather', {'city': 'Lisbon'})]
    >>> split_reasoning("<think>They want the weather.</think>Calling the tool.")
    ('They want the weather.', 'Calling the tool.')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from thena_nb.core.parts.tools import Tool
from thena_nb.core.records.model import ToolSpec
from thena_nb.core.records.types import ToolCall
from thena_nb.core.rescue._accept import accept
from thena_nb.core.rescue._formats import find_calls
from thena_nb.core.rescue._json import MAX_CANDIDATES, Budget
from thena_nb.core.rescue._reasoning import Reasoning, find_reasoning, split_reasoning

__all__ = ["MAX_CALLS", "RescueScan", "rescue_tool_calls", "scan_tool_calls", "split_reasoning"]

MAX_CALLS = 64
"""The most calls (refused ones included) taken from one text; the rest is ignored. No
model makes more in one turn, and each call costs a validation."""


@dataclass(frozen=True)
class RescueScan:
    """What `scan_tool_calls` found in a text."""

    calls: list[ToolCall] = field(default_factory=list)
    """Calls to run, in text order, with `source="rescued"`."""
    refused: list[ToolCall] = field(default_factory=list)
    """Calls naming a tool declared `rescue=False`: `ok=False`, `error` says why."""
    invalid: list[ToolCall] = field(default_factory=list)
    """Calls to a tool whose arguments do not validate, in text order, not run yet: the
    model meant to call, so the executor runs them as failed calls (the validation error
    is their observation)."""
    reasoning: str | None = None
    """The reasoning found in the text (several blocks joined by a blank line); `None` when
    there is none. Calls are never taken from it."""
    text: str | None = None
    """The text without its reasoning (for a harmony output, its `final` channel); `None`
    when nothing was removed."""


def rescue_tool_calls(text: str, tools: Sequence[Tool | ToolSpec]) -> list[ToolCall]:
    """Find the tool calls written in `text` that name one of `tools` and validate.

    Args:
        text: The model's text.
        tools: The tools the agent has.

    Returns:
        The calls to run, in text order (see `scan_tool_calls` for the refused ones).
    """
    return scan_tool_calls(text, tools).calls


def scan_tool_calls(
    text: str, tools: Sequence[Tool | ToolSpec], *, id_prefix: str = "rescued"
) -> RescueScan:
    """Find the tool calls written in `text`, split into calls to run and refused calls.

    Never raises on any text and never evaluates it. Reasoning is split off first (calls
    are never taken from it) and reported in `RescueScan.reasoning` and `.text`, also when
    no call is found; with no tools the scan returns empty at once.

    Ids are assigned here, once: the n-th call found (1-based, in text order, refused and
    invalid ones included) is `{id_prefix}-{n}`, so the same text with the same prefix
    always gives the same ids. The executor passes a prefix made from the turn's request
    key, which a replay reproduces exactly.

    Args:
        text: The model's text.
        tools: The tools the agent has; a `Tool` validates with its signature, a `ToolSpec`
            with a minimal check of its JSON schema.
        id_prefix: What each call's id starts with.

    Returns:
        A `RescueScan` with the calls to run, the calls refused because their tool was
        declared with `@tool(rescue=False)`, the calls whose arguments do not validate, and
        the reasoning split off the text.
    """
    table: dict[str, Tool | ToolSpec] = {}
    for t in tools:
        table.setdefault(t.name, t)
    if not text or not table:
        return RescueScan()
    found_reasoning = find_reasoning(text)
    names = frozenset(table)
    if not any(name in text for name in names):
        return _scan(found_reasoning)
    budget = Budget()
    view, found = find_calls(text, names, found_reasoning.spans, budget)
    calls: list[ToolCall] = []
    refused: list[ToolCall] = []
    invalid: list[ToolCall] = []
    for f in found[:MAX_CANDIDATES]:
        taken = len(calls) + len(refused) + len(invalid)
        if taken >= MAX_CALLS:
            break
        accepted = accept(f, table, view, budget)
        if accepted is None:
            continue
        t, arguments, valid = accepted
        call_id = f"{id_prefix}-{taken + 1}"
        call = ToolCall(id=call_id, name=t.name, arguments=arguments, source="rescued")
        if getattr(t, "rescue", True):
            (calls if valid else invalid).append(call)
        elif valid:
            refused.append(call.model_copy(update={"ok": False, "error": _refusal()}))
    return _scan(found_reasoning, calls, refused, invalid)


def _scan(
    found: Reasoning,
    calls: list[ToolCall] | None = None,
    refused: list[ToolCall] | None = None,
    invalid: list[ToolCall] | None = None,
) -> RescueScan:
    return RescueScan(calls or [], refused or [], invalid or [], found.reasoning, found.text)


def _refusal() -> str:
    # The error observation names the tool already ("tool 'x' was not run: ..."), so the
    # reason does not name it again.
    return (
        "the tool does not accept calls written as text (declared with "
        "`@tool(rescue=False)`); call it through the tool channel"
    )
