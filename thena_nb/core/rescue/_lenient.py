"""A lenient reader for the near-JSON that models write, in one linear pass.

It reads JSON plus what models get wrong in harmless ways: single quotes, Python's `True`,
`False` and `None`, trailing commas, a missing comma between two values, raw newlines and
unknown escapes inside strings, and (only when asked, for text the reply ends with) closers
missing at the very end. It never guesses a string boundary and never turns an unquoted
word into a string, so what it returns is what the model wrote.

The same reader, with a different `Dialect`, reads the argument objects of Gemma
(`{city:<|"|>Paris<|"|>,n:42}`) and FunctionGemma (`{city:<escape>Paris<escape>}`): bare
keys, and strings between a delimiter token with no escapes at all.

Tokens come from one regex applied at increasing positions and containers live on an
explicit stack, so the cost is linear in the input and deep nesting cannot overflow the
interpreter's stack: past `MAX_DEPTH` levels the text is simply not read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FAIL",
    "FUNCTION_GEMMA",
    "GEMMA",
    "JSONISH",
    "MAX_DEPTH",
    "Dialect",
    "read_prefix",
    "read_value",
]

MAX_DEPTH = 64
"""The deepest nesting the reader accepts; deeper values are not read at all."""


class _Fail:
    """Marks a value that could not be read (JSON `null` is a legitimate result)."""

    def __repr__(self) -> str:
        return "FAIL"


FAIL: Any = _Fail()

_NAMES = {
    "true": True,
    "false": False,
    "null": None,
    "True": True,
    "False": False,
    "None": None,
}
_NUMBER = r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?"
# Possessive, unrolled: no backtracking state is kept per character of a long string.
_DOUBLE = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
_SINGLE = r"'[^'\\]*+(?:\\.[^'\\]*+)*+'"


@dataclass(frozen=True)
class Dialect:
    """What a reader accepts: the token regex and whether keys may be bare words."""

    token: re.Pattern[str]
    bare_key: re.Pattern[str] | None = None
    delimiter: str = ""
    """A string delimiter token whose contents are taken as they are (Gemma's `<|"|>`)."""
    names: dict[str, Any] = field(default_factory=lambda: dict(_NAMES))


def _token_pattern(*extra: str) -> re.Pattern[str]:
    parts = [r"(?P<ws>\s+)", *extra, rf"(?P<str>{_DOUBLE}|{_SINGLE})", rf"(?P<num>{_NUMBER})"]
    parts += [r"(?P<name>[A-Za-z_]\w*)", r"(?P<punct>[{}\[\],:])"]
    return re.compile("|".join(parts), re.DOTALL)


JSONISH = Dialect(_token_pattern())
"""JSON with the slips listed in the module docstring."""


def gemma_dialect(delimiter: str) -> Dialect:
    """The argument syntax of Gemma-family calls, with `delimiter` quoting raw strings."""
    d = re.escape(delimiter)
    return Dialect(
        token=_token_pattern(rf"(?P<raw>{d}.*?{d})"),
        bare_key=re.compile(r"\s*([^\s{}\[\],:\"'<][^{}\[\],:\"'<]*?)\s*:"),
        delimiter=delimiter,
        names={"true": True, "false": False, "null": None},
    )


GEMMA = gemma_dialect('<|"|>')
FUNCTION_GEMMA = gemma_dialect("<escape>")

_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_SIMPLE_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "b": "\b",
    "f": "\f",
    "/": "/",
    "\\": "\\",
    '"': '"',
    "'": "'",
}


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if len(code) == 5:
        return chr(int(code[1:], 16))
    # An unknown escape (a Windows path, a regex) keeps its backslash: nothing is invented.
    return _SIMPLE_ESCAPES.get(code, "\\" + code)


def _string(token: str) -> str:
    if token[0] == '"':
        try:
            value = json.loads(token, strict=False)
        except ValueError:
            pass
        else:
            if isinstance(value, str):
                return value
    return _ESCAPE.sub(_unescape, token[1:-1])


class _Reader:
    """One pass over one text; `read` returns the value or `FAIL`."""

    def __init__(
        self, text: str, dialect: Dialect, *, close_at_end: bool, prefix: bool = False
    ) -> None:
        self.text = text
        self.prefix = prefix
        self.dialect = dialect
        self.close_at_end = close_at_end
        self.pos = 0
        # Each open container, and for objects the key awaiting its value.
        self.stack: list[tuple[dict[str, Any] | list[Any], str | None]] = []
        self.root: Any = FAIL
        self.state = "value"  # value | key | colon | after

    def read(self) -> Any:
        while self.pos < len(self.text):
            if self.prefix and self.root is not FAIL and not self.stack:
                return self.root
            if not self._step():
                return FAIL
        if self.state != "after":
            return FAIL
        if self.stack and not (self.close_at_end and self.text.rstrip().endswith(("}", "]"))):
            return FAIL
        return self.root

    def _step(self) -> bool:
        bare = self.dialect.bare_key
        if self.state == "key" and bare is not None and (m := bare.match(self.text, self.pos)):
            self.pos = m.end()
            self.stack[-1] = (self.stack[-1][0], m.group(1))
            self.state = "value"
            return True
        token = self.dialect.token.match(self.text, self.pos)
        if token is None:
            return False
        self.pos = token.end()
        kind = token.lastgroup or ""
        if kind == "ws":
            return True
        if self.root is not FAIL and not self.stack:
            return False  # text after the complete value
        if self.state == "after" and (kind != "punct" or token.group() in "{[") and self.stack:
            # A missing comma between two complete values.
            self._comma()
        if kind == "punct":
            return self._punct(token.group())
        return self._atom(kind, token.group())

    def _atom(self, kind: str, token: str) -> bool:
        value = self._scalar(kind, token)
        if value is FAIL:
            return False
        if self.state == "key":
            if kind not in ("str", "raw"):
                return False
            self.stack[-1] = (self.stack[-1][0], value)
            self.state = "colon"
            return True
        if self.state != "value":
            return False
        self._put(value)
        self.state = "after"
        return True

    def _scalar(self, kind: str, token: str) -> Any:
        if kind == "str":
            return _string(token)
        if kind == "raw":
            d = len(self.dialect.delimiter)
            return token[d:-d]
        if kind == "num":
            try:
                return int(token) if token.lstrip("-").isdigit() else float(token)
            except ValueError:
                return FAIL
        return self.dialect.names.get(token, FAIL) if kind == "name" else FAIL

    def _punct(self, c: str) -> bool:
        if c in "{[":
            if self.state != "value" or len(self.stack) >= MAX_DEPTH:
                return False
            container: dict[str, Any] | list[Any] = {} if c == "{" else []
            self._put(container)
            self.stack.append((container, None))
            self.state = "key" if c == "{" else "value"
            return True
        if c in "}]":
            return self._close(c)
        if c == ":":
            if self.state != "colon":
                return False
            self.state = "value"
            return True
        return self.state == "after" and self._comma()

    def _comma(self) -> bool:
        if not self.stack:
            return False
        self.state = "key" if isinstance(self.stack[-1][0], dict) else "value"
        return True

    def _close(self, c: str) -> bool:
        if not self.stack:
            return False
        container = self.stack[-1][0]
        is_object = isinstance(container, dict)
        if is_object != (c == "}"):
            return False
        # "key" (in an object) or "value" (in a list) here means a trailing comma or an
        # empty container; "value" in an object means a key with no value: `{"a": }`.
        if not (self.state == "after" or self.state == ("key" if is_object else "value")):
            return False
        self.stack.pop()
        self.state = "after"
        return True

    def _put(self, value: Any) -> None:
        if not self.stack:
            self.root = value
            return
        container, key = self.stack[-1]
        if isinstance(container, dict):
            assert key is not None
            container[key] = value
            self.stack[-1] = (container, None)
        else:
            container.append(value)


def read_value(text: str, dialect: Dialect = JSONISH, *, close_at_end: bool = False) -> Any:
    """The one value `text` holds (surrounding whitespace allowed), or `FAIL`.

    Args:
        text: The text to read.
        dialect: What syntax to accept.
        close_at_end: Close containers still open when the text ends, if it ends with a
            closer (`{"a": {"b": 1}` is read as `{"a": {"b": 1}}`; `["a", "b"` is not).
    """
    return _Reader(text, dialect, close_at_end=close_at_end).read()


def read_prefix(text: str, dialect: Dialect) -> tuple[Any, int]:
    """The value `text` starts with and where it ends, ignoring what follows; `(FAIL, 0)`
    if the text does not start with a complete value."""
    reader = _Reader(text, dialect, close_at_end=False, prefix=True)
    value = reader.read()
    return (value, reader.pos) if value is not FAIL else (FAIL, 0)
