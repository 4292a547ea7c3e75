"""The one scrubber: text that may hold a secret is passed through `scrub` before it is kept.

It removes what looks like an API key (`sk-…`, `sk-ant-…`), a bearer token, the value of a
`key=`/`token=`-like query parameter or assignment, the value of every environment variable
whose name says it is a secret (`…KEY…`, `…TOKEN…`, `…SECRET…`, `…PASSWORD…`), and any
secret the caller names (an adapter's own API key). Tracebacks of failed tools go through it
(`ToolCall.traceback`); adapters may use it for their error messages.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable

__all__ = ["REDACTED", "scrub"]

REDACTED = "***"

_MIN_SECRET = 8
"""Shorter values (an environment flag `"1"`, `"true"`) are never taken for secrets."""

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD", re.IGNORECASE)

_PATTERNS: tuple[tuple[str, str], ...] = (
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
    for value in _secret_values(also):
        if value in text:
            text = text.replace(value, REDACTED)
    for pattern, replacement in _compiled():
        text = pattern.sub(replacement, text)
    return text


def _secret_values(also: Iterable[str | None]) -> list[str]:
    """The exact values to remove, longest first (so a longer one is never left half-done)."""
    values = {v for v in also if v and len(v) >= _MIN_SECRET}
    for name, value in os.environ.items():
        if len(value) >= _MIN_SECRET and _SECRET_NAME.search(name):
            values.add(value)
    return sorted(values, key=len, reverse=True)
