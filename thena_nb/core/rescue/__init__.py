"""Find tool calls that a model wrote as text instead of sending them through the tool channel.

Models served without a matching tool parser, or prompted to use tools in text, write calls
into their answer: a bare JSON object, a ```` ```json ```` fence, `<tool_call>` tags,
`<function=…>` tags, a pythonic `[f(a=1)]` list, Mistral's `[TOOL_CALLS]`, `<invoke>` XML,
Qwen3-coder XML, ReAct `Action:` lines, or the special tokens of DeepSeek and Kimi.
`scan_tool_calls` finds them, in text order.

Text is not a trusted channel, so precision comes first:

- only calls naming one of the given tools count, and their arguments must validate;
- reasoning (`<think>…</think>`), block quotes and code fences in other languages are
  never read;
- a call introduced as an example, a template, a refusal or past narration is skipped, and
  so is a call whose values are placeholders (`...`, `<city>`, `CITY`);
- a call cut off before its arguments close is not completed;
- a tool declared with `@tool(rescue=False)` is never run from text: its calls are
  reported in `RescueScan.refused`.

Near-JSON goes through three readers, cheapest first: `json.loads` (with raw newlines
allowed in strings), then Python literal syntax read from `ast.parse`'s tree (single quotes,
`True`/`None`, trailing commas), then json_repair (`json_repair.loads`) for the rest
(a missing comma, a missing final brace). json_repair was chosen over a hand-written parser
because it is maintained, pure Python with no dependencies, and fixes what models really
write. It also turns almost any text into *some* JSON value, so it only sees bracketed
spans under 64 KB that name a known tool, and a repair is kept only if its log shows
punctuation or Python-literal fixes, never an invented string. Nothing is ever evaluated.

Example:
    >>> from thena_nb.core.tools import tool
    >>> @tool
    ... def get_weather(city: str) -> str:
    ...     '''Current weather for a city.'''
    ...     return "sunny"
    >>> text = '<tool_call>{"name": "get_weather", "arguments": {"city": "Lisbon"}}</tool_call>'
    >>> [(c.name, c.arguments) for c in rescue_tool_calls(text, [get_weather])]
    [('get_weather', {'city': 'Lisbon'})]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from thena_nb.core.model import ToolSpec
from thena_nb.core.rescue._accept import accept
from thena_nb.core.rescue._formats import find_calls
from thena_nb.core.tools import Tool
from thena_nb.core.types import ToolCall

__all__ = ["RescueScan", "rescue_tool_calls", "scan_tool_calls"]


@dataclass(frozen=True)
class RescueScan:
    """What `scan_tool_calls` found in a text."""

    calls: list[ToolCall] = field(default_factory=list)
    """Calls to run, in text order, with `source="rescued"`."""
    refused: list[ToolCall] = field(default_factory=list)
    """Calls naming a tool declared `rescue=False`: `ok=False`, `error` says why."""


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

    Never raises on any text and never evaluates it. Ids are assigned here, once: the n-th
    call found (1-based, in text order, refused ones included) is `{id_prefix}-{n}`, so the
    same text with the same prefix always gives the same ids. The executor passes a prefix
    made from the turn's request key, which a replay reproduces exactly.

    Args:
        text: The model's text.
        tools: The tools the agent has; a `Tool` validates with its signature, a `ToolSpec`
            with a minimal check of its JSON schema.
        id_prefix: What each call's id starts with.

    Returns:
        A `RescueScan` with the calls to run and the calls refused because their tool was
        declared with `@tool(rescue=False)`.
    """
    table: dict[str, Tool | ToolSpec] = {}
    for t in tools:
        table.setdefault(t.name, t)
    if not text or not table:
        return RescueScan()
    view, found = find_calls(text, frozenset(table))
    calls: list[ToolCall] = []
    refused: list[ToolCall] = []
    for f in found:
        accepted = accept(f, table, view)
        if accepted is None:
            continue
        t, arguments = accepted
        call_id = f"{id_prefix}-{len(calls) + len(refused) + 1}"
        if getattr(t, "rescue", True):
            calls.append(ToolCall(id=call_id, name=t.name, arguments=arguments, source="rescued"))
        else:
            refused.append(
                ToolCall(
                    id=call_id,
                    name=t.name,
                    arguments=arguments,
                    source="rescued",
                    ok=False,
                    error=_refusal(t.name),
                )
            )
    return RescueScan(calls=calls, refused=refused)


def _refusal(name: str) -> str:
    return (
        f"tool {name!r} does not accept calls written as text (declared with "
        "`@tool(rescue=False)`); call it through the tool channel"
    )
