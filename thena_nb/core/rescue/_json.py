"""JSON pieces of tool-call rescue: bracket scanning, loading, and the object shapes that
mean "a tool call".

Everything here runs in time linear in its input. Bracket matching is one forward scan
whose regexes jump over prose and over string contents, and every piece of text handed to
the lenient reader is capped at `CAP` characters; longer pieces are read by `json.loads`
alone, which is linear too. A `Budget` shared by one scan's readers bounds how many pieces
are parsed at all and how much text the slow readers see.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from thena_nb.core.rescue._lenient import FAIL, read_value

__all__ = [
    "CAP",
    "FAIL",
    "MAX_CANDIDATES",
    "MAX_SLOW_CHARS",
    "Brackets",
    "Budget",
    "Context",
    "RawCall",
    "call_shapes",
    "calls_in_chunk",
    "decode_arguments",
    "json_chunks",
    "load_json",
    "mentions",
    "scan_brackets",
]

CAP = 64 * 1024
"""The longest piece of text handed to the lenient reader or to `ast.parse`."""

MAX_CANDIDATES = 256
"""The most call-shaped pieces of one text that are parsed and checked."""
MAX_SLOW_CHARS = 128 * 1024
"""The most characters of one text read by the slow readers (the lenient reader and
`ast.parse`); past it, only `json.loads` reads, which is fast on any input."""


class Budget:
    """What is left of one scan's parsing budget, shared by all readers.

    A model's reply holds a handful of calls; a reply with hundreds of call-shaped pieces
    is junk or an attack, and reading further into it would only cost time.
    """

    def __init__(self, candidates: int = MAX_CANDIDATES, slow_chars: int = MAX_SLOW_CHARS):
        self.candidates = candidates
        self.slow_chars = slow_chars

    def candidate(self) -> bool:
        """Take one candidate from the budget; `False` when none is left."""
        self.candidates -= 1
        return self.candidates >= 0

    def slow(self, chars: int) -> bool:
        """Take `chars` characters of slow reading; `False` when that would overdraw."""
        if chars > self.slow_chars:
            return False
        self.slow_chars -= chars
        return True


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
_CALL_EXTRAS = frozenset({"id", "type", "call_id", "index", "tool_call_id"})
_DEFINITION_KEYS = frozenset({"description", "properties", "required", "returns", "$schema"})


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
    json_keys: frozenset[str] = frozenset()
    """Typed values the model marked as JSON (DSML's `string="false"`): decoded even when the
    schema does not say their type."""
    loose: bool = False
    """The shape alone does not say a call is meant (arguments written beside the name, or
    Apertus' `{"N": {…}}`, which data has too): it counts only if its arguments validate."""


# -- brackets -------------------------------------------------------------------------------

_OPENERS = re.compile(r"[{\[]")
# Inside brackets: runs of openers, runs of closers, and whole strings. A quote opens a
# string only right after `{ [ , : = (` (and blanks), so apostrophes in text inside
# brackets are skipped by the search itself; a string that never closes runs to the end.
_STRUCTURE = re.compile(
    r"(?P<open>[{\[]+)|(?P<close>[}\]]+)"
    # Possessive, unrolled string patterns keep no backtracking state per character.
    r"|(?<=[{\[,:=(])\s*(?P<str>\"[^\"\\]*+(?:\\.[^\"\\]*+)*+(?:\"|\Z)"
    r"|'[^'\\]*+(?:\\.[^'\\]*+)*+(?:'|\Z))",
    re.DOTALL,
)
_CLOSER = {"{": "}", "[": "]"}
_MIRROR = str.maketrans("{[", "}]")


@dataclass(frozen=True)
class Brackets:
    """The bracketed spans of a text, as `scan_brackets` finds them."""

    spans: list[tuple[int, int]]
    """Outermost balanced `{…}` / `[…]` spans, `(start, end)`, in text order."""
    tails: list[int]
    """Openers still open at the end, outside any string: the outermost, then the innermost
    (one of each at most; none when everything closed)."""


class _Scan:
    """State of one bracket scan: the open brackets and the outermost closed spans."""

    def __init__(self) -> None:
        self.kinds: list[str] = []
        self.starts: list[int] = []
        self.closed: list[tuple[int, int]] = []

    def close(self, start: int, end: int) -> None:
        # Spans closed earlier that start inside this one are nested in it: drop them, so
        # `closed` only ever holds outermost spans, in order.
        while self.closed and self.closed[-1][0] >= start:
            self.closed.pop()
        self.closed.append((start, end))

    def closers(self, run: str, at: int) -> None:
        k = len(run)
        top = "".join(self.kinds[-k:])[::-1].translate(_MIRROR) if len(self.kinds) >= k else ""
        if top == run:
            self.close(self.starts[-k], at + k)
            del self.kinds[-k:]
            del self.starts[-k:]
            return
        for j, c in enumerate(run):
            if self.kinds and _CLOSER[self.kinds[-1]] == c:
                self.kinds.pop()
                self.close(self.starts.pop(), at + j + 1)
            else:
                # A closer that does not match drops every open bracket.
                self.kinds.clear()
                self.starts.clear()


def scan_brackets(s: str) -> Brackets:
    """Match braces and brackets in one pass, skipping those inside quoted strings.

    A quote opens a string only inside brackets and right after `{ [ , : = (`, so
    apostrophes and quotes in prose do not derail the scan. A closer that does not match
    the innermost opener drops every open bracket.
    """
    scan = _Scan()
    pos = 0
    in_string = False
    while True:
        if not scan.kinds:
            m = _OPENERS.search(s, pos)
            if m is None:
                break
            pos = m.start()
        m = _STRUCTURE.search(s, pos)
        if m is None:
            break
        pos = m.end()
        kind = m.lastgroup
        if kind == "open":
            scan.kinds.extend(m.group())
            scan.starts.extend(range(m.start(), pos))
        elif kind == "close":
            scan.closers(m.group(), m.start())
        elif pos == len(s):
            string = m.group("str")
            in_string = len(string) == 1 or string[-1] != string[0]
    tails = [] if in_string or not scan.starts else sorted({scan.starts[0], scan.starts[-1]})
    return Brackets(scan.closed, tails)


def json_chunks(s: str, *, at_end: bool) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """The JSON-looking chunks of `s`: its outermost bracketed spans, and, when `at_end`
    (the text stops there), the unclosed tails that only miss their final closers.

    Spans inside a tail are listed too; the caller reads them if the tail is no call.
    """
    found = scan_brackets(s)
    chunks = [(a, s[a:b]) for a, b in found.spans]
    tails: list[tuple[int, str]] = []
    if at_end:
        for start in found.tails:
            tail = s[start:].rstrip()
            # Only missing final closers are repaired: the tail must end with a closed value.
            if tail.endswith(("}", "]")):
                tails.append((start, tail))
    return chunks, tails


def mentions(chunk: str, names: Iterable[str]) -> bool:
    """Whether `chunk` contains one of the tool names (a cheap filter before parsing)."""
    return any(n in chunk for n in names)


def load_json(chunk: str, *, closing: bool = False, budget: Budget | None = None) -> Any:
    """Load `chunk` as JSON, or as near-JSON when plain JSON fails; `FAIL` if neither.

    The lenient reader only sees text that starts with `{` or `[` and is under `CAP`.

    Args:
        chunk: The text.
        closing: The text is where the reply ends: closers missing at its very end may
            be added (only if it ends with a closed value).
        budget: The scan's budget, charged for lenient reading; without it, none is done.
    """
    try:
        # strict=False: models put raw newlines and tabs inside strings (code, text bodies).
        return json.loads(chunk, strict=False)
    except (ValueError, RecursionError):
        pass
    text = chunk.strip()
    if len(text) > CAP or not text.startswith(("{", "[")):
        return FAIL
    if budget is None or not budget.slow(len(text)):
        return FAIL
    return read_value(text, close_at_end=closing)


# -- call shapes ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """Where a JSON value was found, which decides the shapes it may take."""

    names: frozenset[str]
    budget: Budget = field(default_factory=Budget)
    wrapped: bool = False
    """Inside a call marker (`<tool_call>`, `<|tools_prefix|>`, …): a bare `{"name": N}` is
    a call with no arguments, and `{"N": {…}}` a call to `N`."""
    alone: bool = False
    """The value is the whole reply: `{"N": {…}}` is a call to the known tool `N`."""


def call_shapes(value: Any, ctx: Context, depth: int = 0) -> list[RawCall] | None:
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
            found = call_shapes(item, ctx, depth + 1)
            if found is None:
                return None
            calls.extend(found)
        return calls
    if not isinstance(value, dict):
        return None
    for wrapper in ("tool_calls", "tool_call", "function_call"):
        if wrapper in value and len(value) <= 2:
            return call_shapes(value[wrapper], ctx, depth + 1)
    inner = value.get("function")
    if isinstance(inner, dict) and set(value) <= _CALL_EXTRAS | {"function"}:
        return call_shapes(inner, ctx, depth + 1)
    return _one_call(value, ctx)


def _one_call(d: dict[str, Any], ctx: Context) -> list[RawCall] | None:
    key = next((k for k in NAME_KEYS if isinstance(d.get(k), str)), None)
    if key is None:
        return _keyed_call(d, ctx)
    if _DEFINITION_KEYS & set(d):
        return None
    name = d[key].strip()
    arg_key = next((k for k in ARGUMENT_KEYS if k in d), None)
    if arg_key is not None:
        arguments = decode_arguments(d[arg_key], ctx.budget)
        if arguments is FAIL:
            return None
        return [RawCall(name, arguments)]
    # Flattened arguments: written beside the name instead of under an arguments key.
    rest = {k: v for k, v in d.items() if k != key and k not in _CALL_EXTRAS}
    if not rest and not ctx.wrapped:
        # A lone `{"name": N}` in prose names something; it calls nothing.
        return None
    return [RawCall(name, rest, loose=True)]


def _keyed_call(d: dict[str, Any], ctx: Context) -> list[RawCall] | None:
    """Apertus writes `{"N": {…arguments…}}`; read only for a known tool `N`, and only where
    the context says a call is meant."""
    if len(d) != 1 or not (ctx.wrapped or ctx.alone):
        return None
    ((name, raw),) = d.items()
    if name not in ctx.names:
        return None
    arguments = decode_arguments(raw, ctx.budget)
    return [RawCall(name, arguments, loose=True)] if isinstance(arguments, dict) else None


def decode_arguments(arguments: Any, budget: Budget | None = None) -> Any:
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
    value = load_json(text, budget=budget)
    return value if isinstance(value, dict) else FAIL


def calls_in_chunk(chunk: str, ctx: Context, *, closing: bool = False) -> list[RawCall]:
    """The calls in one bracketed chunk of JSON, or `[]`.

    A list whose elements do not all load is read element by element, so one broken call
    does not hide its siblings.
    """
    if not mentions(chunk, ctx.names) or not ctx.budget.candidate():
        return []
    value = load_json(chunk, closing=closing, budget=ctx.budget)
    if value is FAIL:
        if len(chunk) > CAP or not chunk.lstrip().startswith("["):
            return []
        return _salvage_list(chunk, ctx)
    return call_shapes(value, ctx) or []


def _salvage_list(chunk: str, ctx: Context) -> list[RawCall]:
    inner = chunk.strip()[1:]
    calls: list[RawCall] = []
    for _offset, piece in json_chunks(inner, at_end=False)[0]:
        if piece.startswith("{"):
            calls.extend(calls_in_chunk(piece, ctx))
    return calls
