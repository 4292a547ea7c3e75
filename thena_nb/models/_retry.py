"""Which model API failures are worth retrying, and how long the server asked us to wait.

Model adapters turn SDK errors into `TransientModelError` with these helpers and leave the
retrying to the executor's `RetryPolicy` (S25), so every attempt is recorded on the turn.
Nothing here imports an SDK.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Mapping

from thena_nb.core.records.errors import ModelError, TransientModelError

__all__ = ["TRANSIENT_STATUSES", "retry_after_seconds", "status_error", "transient_status"]

TRANSIENT_STATUSES = frozenset({408, 409, 429})
"""4xx statuses worth retrying: request timeout, lock conflict, rate limit (every 5xx is too)."""

_MAX_RETRY_AFTER = 3600.0
"""A server asking for more than an hour is treated as asking for an hour."""


def transient_status(status: int) -> bool:
    """Whether an HTTP error status is worth retrying.

    408 (request timeout), 409 (conflict), 429 (rate limit) and every 5xx, including
    Anthropic's 529 (overloaded), are transient; any other status is final.

    Args:
        status: The HTTP status code of the failed response.

    Returns:
        `True` when the same request may succeed if sent again later.
    """
    return status in TRANSIENT_STATUSES or 500 <= status <= 599


def status_error(
    text: str,
    *,
    status: int | None,
    model_name: str,
    headers: Mapping[str, str] | None = None,
    transient: bool | None = None,
) -> ModelError:
    """The error for a model call the API answered with an error status.

    Args:
        text: The error message.
        status: The HTTP status, or `None` when the API gave none (an error inside a stream).
        model_name: The model that failed.
        headers: The response headers, for the wait the server asked for.
        transient: Whether the call is worth retrying, when the API said so itself; by
            default `transient_status(status)` decides.

    Returns:
        A `TransientModelError` with the server's `retry_after` when the call is worth
        retrying, else a final `ModelError`; both carry the status.
    """
    if transient is None:
        transient = status is not None and transient_status(status)
    if transient:
        return TransientModelError(
            text,
            retry_after=retry_after_seconds(headers),
            model_name=model_name,
            status_code=status,
        )
    return ModelError(text, model_name=model_name, status_code=status)


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Seconds a server asked us to wait, from `retry-after-ms` or `retry-after`.

    `retry-after-ms` (milliseconds, more precise) wins over `retry-after`, which may be
    seconds (integer or float) or an HTTP date. Header names match in any case.

    Args:
        headers: The response headers (an `httpx` `Headers` or any mapping), or `None`.

    Returns:
        The wait in seconds (never negative, at most an hour), or `None` when the server
        did not say or said something unreadable.
    """
    if headers is None:
        return None
    millis = _header(headers, "retry-after-ms")
    if millis is not None:
        value = _number(millis)
        if value is not None:
            return _clamp(value / 1000)
    after = _header(headers, "retry-after")
    if after is None:
        return None
    value = _number(after)
    if value is not None:
        return _clamp(value)
    parsed = email.utils.parsedate_tz(after)
    if parsed is None:
        return None
    return _clamp(email.utils.mktime_tz(parsed) - time.time())


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is not None:
        return value
    for key, item in headers.items():
        if key.lower() == name:
            return item
    return None


def _number(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _clamp(seconds: float) -> float:
    return min(max(seconds, 0.0), _MAX_RETRY_AFTER)
