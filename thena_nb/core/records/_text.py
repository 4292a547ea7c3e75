"""Text every layer writes the same way: a value as a tool result, a name for any callable, and
text that can always be encoded (lone surrogates written out)."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel

__all__ = ["callable_name", "readable", "to_text"]


def callable_name(fn: Any) -> str:
    """The one name a function, condition, tool or agent is shown by: its `name`, else its
    `__name__`, else its repr."""
    name = getattr(fn, "name", None) or getattr(fn, "__name__", None)
    return str(name) if name else repr(fn)


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def readable(text: str, *, in_json: bool = False) -> str:
    r"""`text` with every lone surrogate written out, so that it can be encoded as UTF-8:
    the bytes of a file name that is not UTF-8 (`os.listdir` decodes them as `\udc80` to
    `\udcff`) become `\xe9`, any other lone surrogate `\ud800`. In JSON text (`in_json`)
    the backslash is doubled, so that the text stays JSON."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        slash = "\\\\" if in_json else "\\"
        return _SURROGATE.sub(lambda m: slash + _escaped(ord(m.group())), text)
    return text


def _escaped(code: int) -> str:
    return f"x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"u{code:04x}"


def to_text(value: Any) -> str:
    """A tool's result as the text the model gets: a string as it is, a pydantic model as its
    JSON, anything else as JSON (or its `str()` when it is not JSON)."""
    if isinstance(value, str):
        return readable(value)
    if type(value) is int:
        return str(value)
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return readable(_result_json(value), in_json=True)
    except (TypeError, ValueError):
        return readable(str(value))


_result_json = json.JSONEncoder(default=str, ensure_ascii=False).encode
"""`json.dumps(value, default=str, ensure_ascii=False)` without making an encoder each call
(a tool that returns a dict or a list has its result written every call)."""
