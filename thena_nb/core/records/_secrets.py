"""The one scrubber: text that may hold a secret is passed through `scrub` before it is kept.

It removes what looks like an API key (`sk-…`, `sk-ant-…`), a bearer token, the user info of
a URL (`https://user:pass@host`), the value of a `key=`/`token=`-like query parameter or
assignment, the value of every environment variable whose name says it is a secret
(`…KEY…`, `…TOKEN…`, `…SECRET…`, `…PASSWORD…`), and any secret the caller names (an
adapter's own API key). Tracebacks of failed tools go through it (`ToolCall.traceback`).

What leaves a model adapter goes through it too: `scrub_exception` cleans an error and the
exceptions chained to it (their messages, `args`, notes and data attributes such as an SDK
error's `body`), and `redact_url` is a URL fit for a repr.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = ["REDACTED", "exception_chain", "redact_url", "scrub", "scrub_data", "scrub_exception"]

REDACTED = "***"

_MIN_SECRET = 8
"""Shorter values (an environment flag `"1"`, `"true"`) are never taken for secrets."""

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD", re.IGNORECASE)

_SECRET_QUERY = re.compile(
    r"key|token|secret|pass|auth|sig|credential|session|code|jwt", re.IGNORECASE
)
"""Query parameter names whose values `redact_url` hides."""

_PATTERNS: tuple[tuple[str, str], ...] = (
    # The user info of a URL: `https://user:password@host`, `https://token@host`.
    (r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/@?#]+@", rf"\g<1>{REDACTED}@"),
    # API keys written as they are issued: `sk-…`, `sk-ant-…`, `sk-proj-…`.
    (r"\bsk-[A-Za-z0-9_\-]{8,}", REDACTED),
    # `Authorization: Bearer <token>`, in headers or text.
    (r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/\-]+=*", rf"\g<1>{REDACTED}"),
    # Query parameters and assignments named like secrets: `?api_key=…`, `token: "…"`.
    (
        r"(?i)\b((?:api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|password"
        r"|passwd|key)[\"']?\s*[=:]\s*[\"']?)([^\s\"'&#,;)]{8,})",
        rf"\g<1>{REDACTED}",
    ),
)


@functools.cache
def _compiled() -> tuple[tuple[re.Pattern[str], str], ...]:
    """The patterns, compiled when first needed (not when `thena_nb` is imported)."""
    return tuple((re.compile(pattern), replacement) for pattern, replacement in _PATTERNS)


def scrub(text: str, *, also: Iterable[str | None] = ()) -> str:
    """`text` with every secret-looking value replaced by `***`.

    Args:
        text: Any text that may be shown or kept: a traceback, an error message.
        also: Further secrets to remove wherever they appear (e.g. a client's API key);
            `None` and values shorter than 8 characters are ignored.

    Example:
        >>> scrub("GET /v1?api_key=abcd1234efgh&n=2 failed for sk-ant-api03-XXXXXXXXXXXX")
        'GET /v1?api_key=***&n=2 failed for ***'
        >>> scrub("password is hunter22", also=["hunter22"])
        'password is ***'
    """
    return _scrubbed(text, _secret_values(also))


def _scrubbed(text: str, values: list[str]) -> str:
    for value in values:
        if value in text:
            text = text.replace(value, REDACTED)
    for pattern, replacement in _compiled():
        text = pattern.sub(replacement, text)
    return text


def scrub_data(value: Any, *, also: Iterable[str | None] = ()) -> Any:
    """`value` with every string in it scrubbed, through dicts, lists and tuples (a copy).

    Example:
        >>> scrub_data({"error": {"message": "bad key sk-ant-api03-XXXXXXXXXXXX"}, "n": 1})
        {'error': {'message': 'bad key ***'}, 'n': 1}
    """
    return _clean(value, _secret_values(also))


def _clean(value: Any, values: list[str]) -> Any:
    if isinstance(value, str):
        return _scrubbed(value, values)
    if type(value) is dict:  # plain containers only: a subclass may not rebuild from items
        return {_clean(k, values): _clean(v, values) for k, v in value.items()}
    if type(value) is list or type(value) is tuple:
        return type(value)(_clean(item, values) for item in value)
    return value


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and every exception chained to it (`__cause__`, `__context__`), each once."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo.extend(e for e in (current.__context__, current.__cause__) if e is not None)


def scrub_exception(exc: BaseException, *, also: Iterable[str | None] = ()) -> None:
    """Scrub `exc` and the exceptions chained to it, in place: what a traceback prints
    (`args`, notes) and the data they keep (string, dict and list attributes, e.g. an SDK
    error's `message` and `body`, a `JSONDecodeError`'s `doc`).

    Example:
        >>> try:
        ...     try:
        ...         raise ValueError("key=abcd1234efgh rejected")
        ...     except ValueError as inner:
        ...         raise RuntimeError("call failed") from inner
        ... except RuntimeError as outer:
        ...     scrub_exception(outer)
        ...     str(outer.__cause__)
        'key=*** rejected'
    """
    values = _secret_values(also)
    for current in exception_chain(exc):
        current.args = tuple(_clean(arg, values) for arg in current.args)
        attributes = getattr(current, "__dict__", {})
        for name, value in list(attributes.items()):
            if isinstance(value, str | dict | list | tuple):
                attributes[name] = _clean(value, values)


def redact_url(url: str) -> str:
    """`url` with its user info and the values of secret-looking query parameters as `***`.

    Example:
        >>> redact_url("https://user:pw@api.example.com/v1?api_key=abc&region=eu")
        'https://***@api.example.com/v1?api_key=***&region=eu'
        >>> redact_url("http://localhost:11434/v1")
        'http://localhost:11434/v1'
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return scrub(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    query = "&".join(_redacted_parameter(item) for item in parts.query.split("&"))
    return scrub(urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment)))


def _redacted_parameter(item: str) -> str:
    name, equals, _ = item.partition("=")
    return f"{name}={REDACTED}" if equals and _SECRET_QUERY.search(name) else item


def _secret_values(also: Iterable[str | None]) -> list[str]:
    """The exact values to remove, longest first (so a longer one is never left half-done)."""
    values = {v for v in also if v and len(v) >= _MIN_SECRET}
    for name, value in os.environ.items():
        if len(value) >= _MIN_SECRET and _SECRET_NAME.search(name):
            values.add(value)
    return sorted(values, key=len, reverse=True)
