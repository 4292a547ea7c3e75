"""Whether a call found in text is accepted: it names a known tool, its arguments are real
values (not placeholders), and it is not an illustration; and whether it validates against
the schema (a call that does not is still a call: the model meant to make it)."""

from __future__ import annotations

import json
import math
import re
from collections import deque
from collections.abc import Mapping
from typing import Any

from thena_nb.core.parts.tools import Tool
from thena_nb.core.records.model import ToolSpec
from thena_nb.core.rescue._blocks import Found
from thena_nb.core.rescue._json import CAP, FAIL, Budget, decode_arguments
from thena_nb.core.rescue._lenient import MAX_DEPTH, read_value

__all__ = ["accept"]


def accept(
    f: Found, table: Mapping[str, Tool | ToolSpec], view: str, budget: Budget
) -> tuple[Tool | ToolSpec, dict[str, Any], bool] | None:
    """The tool and the arguments of a call found in text, and whether the arguments
    validate; `None` if it is no call."""
    t = _lookup(f.call.name, table)
    if t is None:
        return None
    schema = t.parameters
    arguments = _arguments(f, schema, budget)
    if arguments is None or _unsound(arguments) or _has_placeholder(arguments):
        return None
    if _illustrated(view, f.start):
        return None
    valid = _valid(t, arguments)
    if not valid and f.call.loose:
        return None  # data that happens to name a tool, not a call with wrong arguments
    return t, arguments, valid


_NAMESPACES = ("functions.", "default_api.", "tools.")


def _lookup(name: str, table: Mapping[str, Tool | ToolSpec]) -> Tool | ToolSpec | None:
    name = name.strip()
    if name in table:
        return table[name]
    for ns in _NAMESPACES:
        name = name.removeprefix(ns)
    if name in table:
        return table[name]
    # gpt-oss sometimes glues its content type onto the recipient: `functions.shelljson`.
    if name.endswith("json") and name[:-4] in table:
        return table[name[:-4]]
    return None


# -- arguments ---------------------------------------------------------------------------


def _arguments(f: Found, schema: Mapping[str, Any], budget: Budget) -> dict[str, Any] | None:
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
        arguments = _unwrapped(arguments, props, budget)
        arguments = {
            k: _typed(v, props.get(k), budget, k in call.json_keys) if isinstance(v, str) else v
            for k, v in arguments.items()
        }
    return arguments


def _unwrapped(
    arguments: dict[str, Any], props: Mapping[str, Any], budget: Budget
) -> dict[str, Any]:
    """Arguments written as one `arguments` (or `input`) parameter holding a JSON object,
    when the tool has no parameter of that name."""
    if len(arguments) != 1:
        return arguments
    ((key, value),) = arguments.items()
    if key not in ("arguments", "input", "parameters") or key in props:
        return arguments
    inner = decode_arguments(value, budget) if isinstance(value, str) else value
    return inner if isinstance(inner, dict) else arguments


def _single_parameter(schema: Mapping[str, Any]) -> str | None:
    props: list[str] = list(schema.get("properties") or {})
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


def _typed(value: str, prop: Mapping[str, Any] | None, budget: Budget, json_hint: bool) -> Any:
    """A text value converted to the type its schema asks for; kept as text otherwise. With
    no type in the schema, `json_hint` says the model wrote the value as JSON."""
    types = _json_types(prop or {})
    if "string" in types or not (types or json_hint):
        return value
    text = value.strip()
    if len(text) > CAP:
        return value
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    if not budget.slow(len(text)):
        return value
    # Python literals (`True`, `['a', 'b']`), read without evaluating anything.
    loaded = read_value(text)
    return value if loaded is FAIL else loaded


# -- what makes a call-shaped text not a call ------------------------------------------

_TYPE_WORDS = frozenset({"string", "str", "integer", "int", "number", "float", "boolean", "bool"})
_ANGLE = re.compile(r"<[^<>\n]{1,60}>")
_DOUBLE_BRACED = re.compile(r"\{\{\s*[A-Za-z_][\w.-]{0,40}\s*\}\}")
_BRACED = re.compile(r"\{\s*([A-Za-z_][\w.-]{0,40})\s*\}")
_CAPS = re.compile(r"[A-Z][A-Z0-9_]*")
_PLACEHOLDER_WORDS = ("YOUR_", "_HERE", "PLACEHOLDER", "XXX", "TODO")


_PLACEHOLDER_LOOK = 512
"""How many values of a call's arguments are looked at for placeholders. A template is a
small call; a call with thousands of values is data, not a stand-in."""


def _has_placeholder(arguments: dict[str, Any]) -> bool:
    """Whether a value is a stand-in (`...`, `<city>`, `{city}`, `CITY`, `"string"`),
    looking breadth-first at the first `_PLACEHOLDER_LOOK` values."""
    queue: deque[tuple[Any, str]] = deque((v, str(k)) for k, v in arguments.items())
    for _ in range(_PLACEHOLDER_LOOK):
        if not queue:
            return False
        value, key = queue.popleft()
        if isinstance(value, dict):
            queue.extend((v, str(k)) for k, v in value.items())
        elif isinstance(value, list):
            queue.extend((v, key) for v in value)
        elif _is_placeholder(value, key):
            return True
    return False


def _is_placeholder(value: Any, key: str) -> bool:
    if value is Ellipsis:
        return True
    if not isinstance(value, str):
        return False
    s = value.strip()
    if s in ("...", "…") or s.lower() in _TYPE_WORDS:
        return True
    if _ANGLE.fullmatch(s) or _DOUBLE_BRACED.fullmatch(s):
        return True
    # `{city}` stands in for the city; `{value}` as the query, or `{not json}`, is text.
    if (braced := _BRACED.fullmatch(s)) and _same_word(braced.group(1), key):
        return True
    if _CAPS.fullmatch(s):
        return s.lower() == key.lower() or any(w in s for w in _PLACEHOLDER_WORDS)
    return False


def _same_word(a: str, b: str) -> bool:
    def norm(w: str) -> str:
        return w.lower().replace("_", "").replace("-", "").replace(" ", "")

    return bool(b) and norm(a) == norm(b)


def _unsound(value: Any) -> bool:
    """Whether arguments hold what no JSON value can (`NaN`, infinities) or nest deeper than
    the lenient reader reads (`json.loads` reads deeper): such a call would fail later,
    when the run is saved."""
    level = [value]
    for _ in range(MAX_DEPTH):
        items = [v for item in level for v in (item.values() if isinstance(item, dict) else item)]
        if any(isinstance(v, float) and not math.isfinite(v) for v in items):
            return True
        level = [v for v in items if isinstance(v, dict | list)]
        if not level:
            return False
    return True


_ILLUSTRATION = re.compile(
    r"\b(?:for example|examples?|e\.g\.|for instance|sample|samples|template|schema|syntax"
    r"|format(?:ted)? (?:is|like|would)|hypothetical(?:ly)?|illustrat\w*|placeholder"
    r"|(?:would|should|might|could|will) look(?:s)? like|looks like this"
    r"|(?:would|could|might) (?:be|call|use|run|write|do|invoke)"
    r"|(?:you|one) (?:can|could|would|should|might) (?:call|use|write|invoke|run|send)"
    r"|if (?:i|we) were to|such as|something like|suggest\w*"
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
