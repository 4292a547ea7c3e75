"""Pythonic tool calls: `[f(a=1), g()]`, newline-separated calls, `print(default_api.f())`
and Llama 3.1's built-in `brave_search.call(query="…")`.

Calls are read from `ast.parse`'s tree and never evaluated: values must be literals. The
text is first scanned once, string-aware, to find the top-level items of a list and to
rename keyword arguments that are Python keywords (`from=`), so one malformed call or
one reserved word does not hide the calls beside it.
"""

from __future__ import annotations

import ast
import itertools
import keyword
import math
import re
import warnings
from typing import Any

from thena_nb.core.rescue._json import CAP, Budget, RawCall

__all__ = ["looks_pythonic", "parse_pythonic"]

_START = re.compile(r"\[?\s*[A-Za-z_][\w.]*\s*\(")
_KEYWORDS = sorted(k for k in keyword.kwlist if k not in ("True", "False", "None"))
_SCAN = re.compile(
    r"(?P<quote>(?:(?<!\w)[rRbBuUfF]{1,2})?(?:'''|\"\"\"|'|\"))|(?P<open>[(\[{])|(?P<close>[)\]}])"
    rf"|(?P<comma>,)|(?<![\w.])(?P<kw>{'|'.join(_KEYWORDS)})(?=\s*=(?!=))"
)
# Possessive, unrolled: no backtracking state is kept per character of a long string.
_STRINGS = {
    "'": re.compile(r"'[^'\\\n]*+(?:\\.[^'\\\n]*+)*+'"),
    '"': re.compile(r'"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+"'),
    "'''": re.compile(r"'''[^'\\]*+(?:(?:\\.|'(?!''))[^'\\]*+)*+'''", re.DOTALL),
    '"""': re.compile(r'"""[^"\\]*+(?:(?:\\.|"(?!""))[^"\\]*+)*+"""', re.DOTALL),
}
_ESCAPED = "__rescued_kw_"


def looks_pythonic(chunk: str) -> bool:
    """Whether `chunk` starts like a call or a list of calls."""
    return _START.match(chunk) is not None


def _scan(src: str) -> tuple[str, list[int]]:
    """`src` with keyword-named arguments renamed, and the top-level comma positions inside
    an outer `[…]`. A string that never closes ends the scan: what follows is inside it."""
    out: list[str] = []
    commas: list[int] = []
    depth = 0
    skip = 0
    copied = 0
    for m in _SCAN.finditer(src):
        if m.start() < skip:
            continue
        kind = m.lastgroup
        if kind == "quote":
            quote = m.group().lstrip("rRbBuUfF")
            string = _STRINGS[quote].match(src, m.end() - len(quote))
            if string is None:
                break
            skip = string.end()
        elif kind == "open":
            depth += 1
        elif kind == "close":
            depth -= 1
        elif kind == "comma":
            if depth == 1:
                commas.append(m.start())
        else:
            out.append(src[copied : m.start()])
            out.append(_ESCAPED)
            copied = m.start()
    out.append(src[copied:])
    return "".join(out), commas


def parse_pythonic(src: str, budget: Budget, *, builtin: bool = False) -> list[RawCall] | None:
    """Parse `[f(a=1), g()]` or newline-separated calls; `None` if no call is there.

    Values must be literals (`true`/`false`/`null` are accepted too); `...` is a
    placeholder and makes its call not a call. In a list, a call that cannot be read is
    dropped and the others are kept.

    Args:
        src: The text.
        budget: The scan's budget, charged one candidate and the length of `src`.
        builtin: Read `name.call(...)` as a call to `name` (Llama 3.1 built-in tools).
    """
    src = src.strip()
    if len(src) > CAP or not budget.candidate() or not budget.slow(len(src)):
        return None
    escaped, commas = _scan(src)
    nodes = _nodes(escaped)
    if nodes is None and escaped.startswith("[") and escaped.endswith("]"):
        nodes = _salvage(escaped, commas)
    calls = [c for n in nodes or [] if (c := _pythonic_call(n, builtin=builtin)) is not None]
    return calls or None


def _nodes(src: str) -> list[ast.expr] | None:
    try:
        # Model text is full of invalid escapes (`"\{"`); the parser's warnings about them
        # say nothing about the call.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            tree = ast.parse(src, mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError, Warning):
        return None
    nodes: list[ast.expr] = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.Expr):
            return None
        expr = stmt.value
        nodes.extend(expr.elts if isinstance(expr, ast.List) else [expr])
    return nodes


def _salvage(src: str, commas: list[int]) -> list[ast.expr]:
    """The items of a list that does not parse as a whole, each parsed on its own."""
    bounds = [0, *commas, len(src) - 1]
    nodes: list[ast.expr] = []
    for a, b in itertools.pairwise(bounds):
        item = _nodes(src[a + 1 : b].strip())
        if item is not None and len(item) == 1:
            nodes.extend(item)
    return nodes


def _pythonic_call(node: ast.expr, *, builtin: bool) -> RawCall | None:
    if not isinstance(node, ast.Call):
        return None
    name = _dotted(node.func)
    if name == "print" and len(node.args) == 1 and not node.keywords:
        return _pythonic_call(node.args[0], builtin=builtin)
    if name is None:
        return None
    if builtin and name.endswith(".call"):
        name = name[: -len(".call")]
    try:
        positional = tuple(_literal(a) for a in node.args)
        keywords: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                return None
            keywords[kw.arg.removeprefix(_ESCAPED)] = _literal(kw.value)
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


def _finite(value: object) -> bool:
    """`1e999` reads as infinity, which no JSON argument can hold."""
    return not isinstance(value, float) or math.isfinite(value)


_KEY_TYPES = (str, int, float, bool, type(None))


def _literal(node: ast.expr) -> Any:
    match node:
        # Bytes, complex numbers and `...` are Python, not values a tool takes.
        case ast.Constant(value=str() | int() | float() | None as value) if _finite(value):
            return value
        case ast.Name(id=name) if name in _NAMED_LITERALS:
            return _NAMED_LITERALS[name]
        case ast.UnaryOp(op=ast.USub(), operand=ast.Constant(value=int() | float() as v)) if (
            _finite(v)
        ):
            return -v
        case ast.List(elts=elts) | ast.Tuple(elts=elts):
            return [_literal(e) for e in elts]
        case ast.Dict(keys=keys, values=values):
            out: dict[Any, Any] = {}
            for key, item in zip(keys, values, strict=True):
                k = None if key is None else _literal(key)
                if key is None or not isinstance(k, _KEY_TYPES):
                    raise ValueError("not a literal dict key")
                out[k] = _literal(item)
            return out
    raise ValueError(f"not a literal: {type(node).__name__}")
