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

import ast
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from thena_nb.core._rescue_formats import Found, find_calls
from thena_nb.core._rescue_json import CAP, FAIL, load_json
from thena_nb.core.model import ToolSpec
from thena_nb.core.tools import Tool
from thena_nb.core.types import ToolCall

__all__ = ["RescueScan", "rescue_tool_calls", "scan_tool_calls"]


@dataclass(frozen=True)
class RescueScan:
    """What `scan_tool_calls` found in a text."""

    calls: list[ToolCall] = field(default_factory=list)
    """Calls to run, in text order, with `source="rescued"` and ids `rescued-0`, `rescued-1`, …"""
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


def scan_tool_calls(text: str, tools: Sequence[Tool | ToolSpec]) -> RescueScan:
    """Find the tool calls written in `text`, split into calls to run and refused calls.

    Never raises on any text and never evaluates it.

    Args:
        text: The model's text.
        tools: The tools the agent has; a `Tool` validates with its signature, a `ToolSpec`
            with a minimal check of its JSON schema.

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
        accepted = _accept(f, table, view)
        if accepted is None:
            continue
        t, arguments = accepted
        if getattr(t, "rescue", True):
            calls.append(
                ToolCall(
                    id=f"rescued-{len(calls)}", name=t.name, arguments=arguments, source="rescued"
                )
            )
        else:
            refused.append(
                ToolCall(
                    id=f"refused-{len(refused)}",
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


def _accept(
    f: Found, table: Mapping[str, Tool | ToolSpec], view: str
) -> tuple[Tool | ToolSpec, dict[str, Any]] | None:
    t = _lookup(f.call.name, table)
    if t is None:
        return None
    schema = t.parameters
    arguments = _arguments(f, schema)
    if arguments is None or _has_placeholder(arguments):
        return None
    if _illustrated(view, f.start):
        return None
    return (t, arguments) if _valid(t, arguments) else None


_NAMESPACES = ("functions.", "default_api.", "tools.")


def _lookup(name: str, table: Mapping[str, Tool | ToolSpec]) -> Tool | ToolSpec | None:
    name = name.strip()
    if name in table:
        return table[name]
    for ns in _NAMESPACES:
        if name.startswith(ns) and name[len(ns) :] in table:
            return table[name[len(ns) :]]
    return None


# -- arguments ---------------------------------------------------------------------------


def _arguments(f: Found, schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """The call's arguments as a dict, typed by the schema when written as text."""
    call = f.call
    props: Mapping[str, Any] = schema.get("properties") or {}
    raw = call.arguments
    if raw is None:
        arguments: dict[str, Any] = {}
    elif isinstance(raw, str):
        # A plain-string input goes to the tool's single (required) parameter.
        target = _single_parameter(schema)
        if target is None:
            return None
        arguments = {target: raw}
    elif isinstance(raw, dict) and all(isinstance(k, str) for k in raw):
        arguments = dict(raw)
    else:
        return None
    if call.positional:
        order = list(props)
        if len(call.positional) > len(order):
            return None
        for key, value in zip(order, call.positional, strict=False):
            if key in arguments:
                return None
            arguments[key] = value
    if call.typed:
        arguments = {
            k: _typed(v, props.get(k, {})) if isinstance(v, str) else v
            for k, v in arguments.items()
        }
    return arguments


def _single_parameter(schema: Mapping[str, Any]) -> str | None:
    props = list(schema.get("properties") or {})
    required = list(schema.get("required") or [])
    if len(required) == 1:
        return str(required[0])
    if not required and len(props) == 1:
        return props[0]
    return None


def _json_types(prop: Mapping[str, Any]) -> set[str]:
    declared = prop.get("type")
    types = {declared} if isinstance(declared, str) else set(declared or [])
    for key in ("anyOf", "oneOf"):
        for sub in prop.get(key) or []:
            if isinstance(sub, Mapping):
                types |= _json_types(sub)
    if "$ref" in prop:
        types.add("object")
    return {t for t in types if isinstance(t, str)}


def _typed(value: str, prop: Mapping[str, Any]) -> Any:
    """A text value converted to the type its schema asks for; kept as text otherwise."""
    types = _json_types(prop)
    if not types or "string" in types:
        return value
    text = value.strip()
    if len(text) > CAP:
        return value
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    if types & {"object", "array"}:
        loaded = load_json(text)
        if loaded is not FAIL:
            return loaded
    return value


# -- what makes a call-shaped text not a call ------------------------------------------

_TYPE_WORDS = frozenset({"string", "str", "integer", "int", "number", "float", "boolean", "bool"})
_ANGLE = re.compile(r"<[^<>\n]{1,60}>")
_BRACED = re.compile(r"\{\{?\s*[A-Za-z_][\w .-]{0,40}\}?\}")
_CAPS = re.compile(r"[A-Z][A-Z0-9_]*")
_PLACEHOLDER_WORDS = ("YOUR_", "_HERE", "PLACEHOLDER", "XXX", "TODO")


def _has_placeholder(value: Any, key: str = "", depth: int = 0) -> bool:
    """Whether a value is a stand-in (`...`, `<city>`, `{city}`, `CITY`, `"string"`)."""
    if depth > 20:
        return False
    if isinstance(value, dict):
        return any(_has_placeholder(v, str(k), depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_placeholder(v, key, depth + 1) for v in value)
    if value is Ellipsis:
        return True
    if not isinstance(value, str):
        return False
    s = value.strip()
    if s in ("...", "…") or s.lower() in _TYPE_WORDS:
        return True
    if _ANGLE.fullmatch(s) or _BRACED.fullmatch(s):
        return True
    if _CAPS.fullmatch(s):
        return s.lower() == key.lower() or any(w in s for w in _PLACEHOLDER_WORDS)
    return False


_ILLUSTRATION = re.compile(
    r"\b(?:for example|examples?|e\.g\.|for instance|sample|samples|template|schema|syntax"
    r"|format(?:ted)? (?:is|like|would)|hypothetical(?:ly)?|illustrat\w*|placeholder"
    r"|(?:would|should|might|could|will) look(?:s)? like|looks like this"
    r"|(?:would|could|might) (?:be|call|use|run|write|do|invoke)"
    r"|(?:you|one) (?:can|could|would|should|might) (?:call|use|write|invoke|run|send)"
    r"|if (?:i|we) were to|such as|something like"
    r"|(?:i|we) (?:have |had |already )?(?:called|used|ran|invoked)|previously|earlier"
    r"|last time|my plan|the plan|plan:|was called with"
    r"|the (?:page|document|file|email|message|website|site|content|output|result|response)"
    r" (?:says|said|contains|reads|includes|returned)"
    r"|(?:can't|cannot|can not|won't|will not|shouldn't|should not|must not|refuse to"
    r"|unable to|not able to|not going to|not allowed to|don't|do not)"
    r"\b[^.!?\n]{0,40}\b(?:call|run|use|execute|invoke|perform|trigger|send))",
    re.IGNORECASE,
)
_LEAD_WINDOW = 300
_SENTENCE_END = re.compile(r"[.!?](?=\s)|\n[ \t]*\n")


def _illustrated(view: str, start: int) -> bool:
    """Whether the sentence leading up to a call presents it as an example, a refusal,
    narration, a plan or quoted content, rather than as a call being made."""
    lines = view[max(0, start - _LEAD_WINDOW) : start].split("\n")
    while lines and (not lines[-1].strip() or lines[-1].lstrip().startswith(("```", "~~~"))):
        lines.pop()
    lead = "\n".join(lines).rstrip(" \t.!?:")
    ends = [m.end() for m in _SENTENCE_END.finditer(lead)]
    sentence = lead[ends[-1] :] if ends else lead
    return _ILLUSTRATION.search(sentence) is not None


# -- validation --------------------------------------------------------------------------


def _valid(t: Tool | ToolSpec, arguments: dict[str, Any]) -> bool:
    if isinstance(t, Tool):
        try:
            t.validate(arguments)
        # A custom validator may raise anything; a call that fails it is simply not rescued.
        except Exception:
            return False
        return True
    return _matches_schema(arguments, t.parameters)


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def _matches_schema(arguments: Mapping[str, Any], schema: Mapping[str, Any]) -> bool:
    """A minimal JSON-schema check for `ToolSpec` tools: required keys, no unknown keys
    when `additionalProperties` is false, and the basic type and enum of each value."""
    props: Mapping[str, Any] = schema.get("properties") or {}
    if any(r not in arguments for r in schema.get("required") or []):
        return False
    if schema.get("additionalProperties") is False and any(k not in props for k in arguments):
        return False
    return all(_value_matches(v, props[k]) for k, v in arguments.items() if k in props)


def _value_matches(value: Any, prop: Any) -> bool:
    if not isinstance(prop, Mapping):
        return True
    if "enum" in prop and value not in prop["enum"]:
        return False
    alternatives = [s for key in ("anyOf", "oneOf") for s in prop.get(key) or []]
    if alternatives and not any(_value_matches(value, s) for s in alternatives):
        return False
    declared = prop.get("type")
    if declared is None:
        return True
    names = [declared] if isinstance(declared, str) else list(declared)
    return any(_is_json_type(value, n) for n in names)


def _is_json_type(value: Any, name: str) -> bool:
    kinds = _JSON_TYPES.get(name)
    if kinds is None:
        return True
    if isinstance(value, bool) and name in ("integer", "number"):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, kinds)
