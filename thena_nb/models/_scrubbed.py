"""The adapters' one scrubber: what an adapter raises, scrubbed of secrets before it leaves
(the `ModelError`, the SDK exception kept as its `__cause__`, and everything chained to that),
and what the SDKs themselves log (`scrub_sdk_logs`).

Every string goes through `core/records/_secrets.py` (`scrub_exception`: messages, `args`, notes, an
SDK error's `message` and `body`). The HTTP response and request an SDK error holds are
replaced by copies whose headers, URL and body are scrubbed too (the request carried the
API key in its headers; a server may echo it in its own), under whatever attribute they
are kept (`request`, `response`, or a transport error's private `_request`). Nothing here
imports an SDK.

The SDKs log at DEBUG what they send and receive (request options, response headers, which a
server may use to echo the key back). Each adapter, when it is made, registers its key with
`scrub_sdk_logs`, which puts one `logging.Filter` on the SDK and HTTP client loggers: every
record they make has its message, arguments, exception text and stack scrubbed of every
registered key and of whatever `scrub` recognises, before any handler sees it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, TypeVar

from thena_nb.core.records._secrets import (
    REDACTED,
    exception_chain,
    redact_url,
    scrub,
    scrub_exception,
)

__all__ = ["scrub_sdk_logs", "scrubbed"]

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


_SDK_LOGGERS = frozenset({"anthropic", "openai", "httpx", "httpx2", "httpcore"})
"""The loggers (and their children) of the SDKs and the HTTP clients under them."""

_logged_secrets: set[str] = set()
"""Every adapter's key, for the log filter (a key stays registered: a record may outlive
its adapter)."""


class _LogScrubber(logging.Filter):
    """Scrubs each record of an SDK logger in place; never drops one."""

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = list(_logged_secrets)
        try:
            message = record.getMessage()
        except Exception:  # a broken format: keep its parts, each scrubbed
            message = f"{record.msg} {record.args!r}"
        record.msg = scrub(message, also=secrets)
        record.args = None  # (already in `msg`: nothing left to format)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub(record.exc_text, also=secrets)
        if record.stack_info:
            record.stack_info = scrub(record.stack_info, also=secrets)
        return True


_FILTER = _LogScrubber()
_loggers_seen = -1
"""How many loggers existed at the last look (a new SDK module may have made one since)."""


def scrub_sdk_logs(secrets: Iterable[str | None]) -> None:
    """Register `secrets` (an adapter's keys) and make sure every SDK logger scrubs them.

    Called when an adapter is made. The filter goes on each SDK logger once (a logger's
    filters see only its own records, not those its children pass up); loggers are looked
    for again only when new ones have appeared since the last call.
    """
    global _loggers_seen
    _logged_secrets.update(value for value in secrets if value)
    loggers = logging.Logger.manager.loggerDict
    if len(loggers) == _loggers_seen:
        return
    _loggers_seen = len(loggers)
    for name, logger in list(loggers.items()):
        if name.partition(".")[0] in _SDK_LOGGERS and isinstance(logger, logging.Logger):
            logger.addFilter(_FILTER)  # (once: a filter already there is not added again)
