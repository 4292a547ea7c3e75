"""What an adapter raises, scrubbed of secrets before it leaves: the `ModelError`, the SDK
exception kept as its `__cause__`, and everything chained to that.

Every string goes through `core/_secrets.py` (`scrub_exception`: messages, `args`, notes, an
SDK error's `message` and `body`). The HTTP response and request an SDK error holds are
replaced by copies whose headers, URL and body are scrubbed too (the request carried the
API key in its headers; a server may echo it in its own), under whatever attribute they
are kept (`request`, `response`, or a transport error's private `_request`). Nothing here
imports an SDK.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from thena_nb.core._secrets import REDACTED, exception_chain, redact_url, scrub, scrub_exception

__all__ = ["scrubbed"]

E = TypeVar("E", bound=BaseException)

_AUTH_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "cookie", "set-cookie"}
)
"""Headers whose values are credentials whatever they hold."""


def scrubbed(error: E, cause: BaseException | None, *, secrets: Iterable[str | None]) -> E:
    """`error`, with `cause` as its `__cause__`, both (and their chains) scrubbed in place.

    Args:
        error: The error the adapter raises (`raise scrubbed(...) from cause`).
        cause: The SDK or transport exception it stands for, or `None`.
        secrets: The adapter's own secrets (its API key), removed wherever they appear.
    """
    values = [value for value in secrets if value]
    if cause is not None:
        error.__cause__ = cause
    scrub_exception(error, also=values)
    for current in exception_chain(error):
        attributes = getattr(current, "__dict__", {})
        # Any attribute, private ones too: an `httpx` transport error keeps its request in
        # `_request`, whose headers carry `Authorization: Bearer <key>`.
        for name, held in list(attributes.items()):
            if _is_http_message(held):
                attributes[name] = _http_copy(held, values)
    return error


def _is_http_message(value: Any) -> bool:
    """Whether `value` is an HTTP request or response (an `httpx` one, or shaped like it)."""
    return hasattr(value, "headers") and (hasattr(value, "method") or hasattr(value, "status_code"))


def _http_copy(message: Any, values: list[str]) -> Any:
    """A scrubbed copy of an `httpx` response or request (the same type), or `None` when
    one cannot be made (then nothing of it is kept)."""
    try:
        headers = [(name, _header(name, value, values)) for name, value in message.headers.items()]
        if hasattr(message, "status_code"):
            request = _request_of(message)
            return type(message)(
                message.status_code,
                headers=headers,
                content=scrub(_text(message), also=values).encode(),
                request=None if request is None else _http_copy(request, values),
            )
        return type(message)(message.method, redact_url(str(message.url)), headers=headers)
    except Exception:  # an SDK's own type we cannot rebuild: drop it rather than keep a key
        return None


def _request_of(response: Any) -> Any:
    try:
        return response.request
    except RuntimeError:  # a response built without one
        return None


def _header(name: str, value: str, values: list[str]) -> str:
    return REDACTED if name.lower() in _AUTH_HEADERS else scrub(value, also=values)


def _text(response: Any) -> str:
    try:
        return str(response.text)
    except Exception:  # a streamed body never read
        return ""
