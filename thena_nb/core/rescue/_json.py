"""JSON and pythonic pieces of tool-call rescue: bracket scanning, loading with repair, and
the object shapes that mean "a tool call".

Everything here runs in time linear in its input. Bracket matching walks a single token
stream (no backtracking regexes), and every piece of text handed to a parser is capped at
`CAP` characters, because repair and `ast.parse` are the expensive steps.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from json_repair import loads as _repair_loads

CAP = 64 * 1024
"""The longest piece of text handed to a JSON or Python parser."""

NAME_KEYS = ("name", "tool", "tool_name", "action", "function", "recipient_name")
ARGUMENT_KEYS = (
    "arguments",
    "parameters",
    "input",
    "tool_input",
    "action_input",
    "args",
    "params",
)
_CALL_EXTRAS = frozenset({"id", "type", "call_id", "index"})
_DEFINITION_KEYS = frozenset({"description", "properties", "required", "returns", "$schema"})

_TOKENS = re.compile(r"""[][{}"'\\]""")
_CLOSER = {"{": "}", "[": "]"}
_QUOTE_AFTER = frozenset("{[,:=(")
_PYTHONIC_START = re.compile(r"\[\s*[A-Za-z_][\w.]*\s*\(")


class _Fail:
    """Marks a value that could not be loaded (JSON `null` is a legitimate result)."""


FAIL = _Fail()


@dataclass(frozen=True)
class RawCall:
    """A call as written, before its tool is looked up and its arguments validated."""

    name: str
    arguments: Any
    """A dict, a plain string (the input of a one-parameter tool), or `None` for none."""
    positional: tuple[Any, ...] = ()
    """Pythonic calls: positional arguments, mapped to parameters in schema order."""
    typed: bool = False
    """The values are raw text (XML, ReAct) and get their types from the tool's schema."""


@dataclass(frozen=True)
class Brackets:
    """The bracketed spans of a text, as `scan_brackets` finds them."""

    spans: list[tuple[int, int]]
    """Outermost balanced `{…}` / `[…]` spans, `(start, end)`, in text order."""
    tail: int | None
    """The innermost opener still open at the end, outside any string; `None` if none."""


def scan_brackets(s: str) -> Brackets:
    """Match braces and brackets in one pass, skipping those inside quoted strings.

    A quote opens a string only inside brackets and right after `{ [ , : = (`, so
    apostrophes and quotes in prose do not derail the scan. A closer that does not match
    the innermost opener drops every open bracket.
    """
    stack: list[tuple[str, int]] = []
    closed: list[tuple[int, int]] = []
    quote = ""
    skip = -1
    for m in _TOKENS.finditer(s):
        i = m.start()
        if i == skip:
            continue
        c = s[i]
        if quote:
            if c == "\\":
                skip = i + 1
            elif c == quote:
                quote = ""
            continue
        if c in "\"'":
            if stack and _previous_char(s, i) in _QUOTE_AFTER:
                quote = c
        elif c in _CLOSER:
            stack.append((c, i))
        elif c in "}]":
            if stack and _CLOSER[stack[-1][0]] == c:
                closed.append((stack.pop()[1], i + 1))
            else:
                stack.clear()
    tail = stack[-1][1] if stack and not quote else None
    return Brackets(_outermost(closed), tail)


def _previous_char(s: str, i: int) -> str:
    j = i - 1
    while j >= 0 and s[j] in " \t\r\n":
        j -= 1
    return s[j] if j >= 0 else ""


def _outermost(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    spans.sort()
    kept: list[tuple[int, int]] = []
    end = -1
    for start, stop in spans:
        if start >= end:
            kept.append((start, stop))
            end = stop
    return kept


def json_chunks(s: str, *, at_end: bool) -> tuple[list[tuple[int, str]], tuple[int, str] | None]:
    """The JSON-looking chunks of `s`: its outermost bracketed spans, and the unclosed tail
    when `at_end` (the text stops there) and only its final closer is missing.

    Spans inside the tail are listed too; the caller reads them if the tail is no call.
    """
    found = scan_brackets(s)
    chunks = [(a, s[a:b]) for a, b in found.spans]
    if at_end and found.tail is not None:
        tail = s[found.tail :].rstrip()
        # Only a missing final closer is repaired: the tail must end with a closed value.
        if tail.endswith(("}", "]")):
            return chunks, (found.tail, tail)
    return chunks, None


def mentions(chunk: str, names: Iterable[str]) -> bool:
    """Whether `chunk` contains one of the tool names (a cheap filter before parsing)."""
    return any(n in chunk for n in names)


def load_json(chunk: str) -> Any:
    """Load `chunk` as JSON, repairing it when plain JSON fails; `FAIL` if neither works.

    Repair is only attempted on text that starts with `{` or `[` and is under `CAP`:
    json_repair turns almost any text into some value.
    """
    try:
        # strict=False: models put raw newlines and tabs inside strings (code, text bodies).
        return json.loads(chunk, strict=False)
    except (ValueError, RecursionError):
        pass
    text = chunk.strip()
    if len(text) > CAP or not text.startswith(("{", "[")):
        return FAIL
    value = python_literal(text)
    if value is not FAIL:
        return value
    try:
        repaired = _repair_loads(text, logging=True)
    # json_repair is third-party code run on untrusted text: any failure means "no JSON".
    except Exception:
        return FAIL
    if not isinstance(repaired, tuple):
        return FAIL
    value, log = repaired
    if not all(_harmless(entry) for entry in log):
        return FAIL
    return value if isinstance(value, dict | list) else FAIL


_HARMLESS_REPAIRS = ("python", "closing ]", "closing }", "comma")


def _harmless(entry: Any) -> bool:
    """Whether a repair json_repair logged only fixes punctuation or Python literals.

    Anything else (an unquoted value turned into a string, a guessed string boundary)
    invents data, and a call built on invented data is not a call the model made.
    """
    text = str(entry.get("text", "") if isinstance(entry, dict) else entry).lower()
    return any(marker in text for marker in _HARMLESS_REPAIRS)


def python_literal(text: str) -> Any:
    """A dict or list written in Python literal syntax (single quotes, `True`, `None`,
    trailing commas), read from the syntax tree without evaluating; `FAIL` otherwise."""
    try:
        tree = ast.parse(text, mode="eval")
        value = _literal(tree.body)
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return FAIL
    return value if isinstance(value, dict | list) else FAIL


def calls_in_chunk(chunk: str, names: Iterable[str]) -> list[RawCall]:
    """The calls in one bracketed chunk (JSON shapes or a pythonic list), or `[]`."""
    if len(chunk) > CAP or not mentions(chunk, names):
        return []
    if _PYTHONIC_START.match(chunk):
        return parse_pythonic(chunk) or []
    value = load_json(chunk)
    if value is FAIL:
        return []
    return call_shapes(value) or []


def call_shapes(value: Any, depth: int = 0) -> list[RawCall] | None:
    """Read a loaded JSON value as one or more calls; `None` if it is not call-shaped.

    A list counts only if every element is a call, so a list of records that merely have
    a `name` is not mistaken for calls.
    """
    if depth > 4:
        return None
    if isinstance(value, list):
        if not value:
            return None
        calls: list[RawCall] = []
        for item in value:
            found = call_shapes(item, depth + 1)
            if found is None:
                return None
            calls.extend(found)
        return calls
    if not isinstance(value, dict):
        return None
    for wrapper in ("tool_calls", "tool_call", "function_call"):
        if wrapper in value and len(value) <= 2:
            return call_shapes(value[wrapper], depth + 1)
    inner = value.get("function")
    if isinstance(inner, dict) and set(value) <= _CALL_EXTRAS | {"function"}:
        return call_shapes(inner, depth + 1)
    return _one_call(value)


def _one_call(d: dict[str, Any]) -> list[RawCall] | None:
    key = next((k for k in NAME_KEYS if isinstance(d.get(k), str)), None)
    if key is None or _DEFINITION_KEYS & set(d):
        return None
    name = d[key].strip()
    arg_key = next((k for k in ARGUMENT_KEYS if k in d), None)
    if arg_key is not None:
        arguments = decode_arguments(d[arg_key])
        if arguments is FAIL:
            return None
        return [RawCall(name, arguments)]
    # Flattened arguments: written beside the name instead of under an arguments key.
    rest = {k: v for k, v in d.items() if k != key and k not in _CALL_EXTRAS}
    return [RawCall(name, rest)]


def decode_arguments(arguments: Any) -> Any:
    """Arguments as a dict, decoding a JSON string; a plain string stays a string."""
    if arguments is None or isinstance(arguments, dict):
        return arguments
    if not isinstance(arguments, str):
        return FAIL
    text = arguments.strip()
    if not text.startswith("{"):
        return arguments
    if not text.endswith("}"):
        return FAIL
    value = load_json(text)
    return value if isinstance(value, dict) else FAIL


def parse_pythonic(src: str) -> list[RawCall] | None:
    """Parse `[f(a=1), g()]` or newline-separated calls with `ast`; never evaluates.

    Values must be literals (`true`/`false`/`null` are accepted too); `...` is a
    placeholder and makes the whole text not a call.
    """
    if len(src) > CAP:
        return None
    try:
        tree = ast.parse(src.strip(), mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    nodes: list[ast.expr] = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.Expr):
            return None
        expr = stmt.value
        nodes.extend(expr.elts if isinstance(expr, ast.List) else [expr])
    if not nodes:
        return None
    calls: list[RawCall] = []
    for node in nodes:
        call = _pythonic_call(node)
        if call is None:
            return None
        calls.append(call)
    return calls


def _pythonic_call(node: ast.expr) -> RawCall | None:
    if not isinstance(node, ast.Call):
        return None
    if _dotted(node.func) == "print" and len(node.args) == 1 and not node.keywords:
        return _pythonic_call(node.args[0])
    name = _dotted(node.func)
    if name is None:
        return None
    try:
        positional = tuple(_literal(a) for a in node.args)
        keywords: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                return None
            keywords[kw.arg] = _literal(kw.value)
    except (ValueError, RecursionError):
        return None
    return RawCall(name, keywords, positional)


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


_NAMED_LITERALS = {"true": True, "false": False, "null": None}


def _literal(node: ast.expr) -> Any:
    match node:
        case ast.Constant(value=value) if value is not Ellipsis:
            return value
        case ast.Name(id=name) if name in _NAMED_LITERALS:
            return _NAMED_LITERALS[name]
        case ast.UnaryOp(op=ast.USub(), operand=ast.Constant(value=int() | float() as v)):
            return -v
        case ast.List(elts=elts) | ast.Tuple(elts=elts):
            return [_literal(e) for e in elts]
        case ast.Dict(keys=keys, values=values):
            out: dict[Any, Any] = {}
            for key, item in zip(keys, values, strict=True):
                if key is None:
                    raise ValueError("`**` in a dict literal")
                out[_literal(key)] = _literal(item)
            return out
    raise ValueError(f"not a literal: {type(node).__name__}")
