"""The connection pools of the API adapters: which SDK client a call goes through, and the
TLS settings every pool verifies servers with.

HTTP connections belong to the event loop that opened them, so an adapter's SDK client (and
its pool) is per event loop (`LoopClients`). Making TLS settings loads the CA bundle, about
25 ms of CPU, and a notebook's `wf.run()` has a loop of its own each time: so the settings
are made once per process (`ssl_context`), the way the SDKs' transport makes them by default
(certifi's CA bundle, or `SSL_CERT_FILE` / `SSL_CERT_DIR` when set: read when the first pool
is made), and shared, as an `ssl.SSLContext` serves any number of connections on any
thread. For other TLS settings, give the model a configured SDK client (`client=`).
"""

from __future__ import annotations

import asyncio
import ssl
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar

from thena_nb.core.engine._aio import close_at_loop_end, owns_loop

try:  # the SDKs' transport: httpx2 from their 2.x and 3.x releases, httpx before
    import httpx2 as _http
except ImportError:  # pragma: no cover - older SDKs
    import httpx as _http  # type: ignore[no-redef]

__all__ = ["LoopClients", "ssl_context"]

_lock = threading.Lock()
_context: list[ssl.SSLContext] = []


def ssl_context() -> ssl.SSLContext:
    """The process's TLS settings for the adapters' connection pools, made on first use.

    Example:
        >>> ssl_context() is ssl_context()
        True
    """
    with _lock:
        if not _context:
            _context.append(_http.create_ssl_context())
        return _context[0]


class _Closable(Protocol):
    def close(self) -> Awaitable[Any]: ...


C = TypeVar("C", bound=_Closable)


class LoopClients(Generic[C]):
    """The SDK client a model calls through on the running event loop, each with a
    connection pool of its own.

    On a loop `run_sync` made (a thread's reused loop: the runs of a script; or a notebook
    run's fresh one), the client is made on the loop's first call, kept for its later ones,
    and closed as the loop ends (`close_at_loop_end`). On any other loop (`asyncio.run`, a
    kernel's own), the client of the last such loop is kept alone: a pool's open
    connections hold their loop, so keeping more would keep loops alive that are gone.

    Example:
        >>> class Client:
        ...     async def close(self) -> None: ...
        >>> clients: LoopClients[Client] = LoopClients()
        >>> async def twice() -> bool:
        ...     return clients.for_running_loop(Client) is clients.for_running_loop(Client)
        >>> asyncio.run(twice())
        True
    """

    def __init__(self) -> None:
        self._ours: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, C]
        self._ours = weakref.WeakKeyDictionary()
        self._other: tuple[weakref.ref[asyncio.AbstractEventLoop], C] | None = None

    def for_running_loop(self, make: Callable[[], C]) -> C:
        """The client for calls on the running loop: `make()` on the loop's first call."""
        loop = asyncio.get_running_loop()
        if owns_loop(loop):
            client = self._ours.get(loop)
            if client is None:
                client = self._ours[loop] = make()
                close_at_loop_end(loop, client.close)
            return client
        other = self._other
        if other is None or other[0]() is not loop:
            self._other = other = (weakref.ref(loop), make())
        return other[1]

    def clients(self) -> list[C]:
        """The clients made and still kept (their keys are what errors must not show)."""
        kept = list(self._ours.values())
        if self._other is not None:
            kept.append(self._other[1])
        return kept
