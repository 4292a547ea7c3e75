"""The MCP loop: one event loop in a daemon thread, where every MCP connection lives.

A run's event loop may be short-lived (`wf.run` under Jupyter runs on a fresh loop in a
worker thread) and its tasks come and go, while the SDK's transports hold task groups that
must be left in the task that entered them. So each connection is owned by one task here,
and a run reaches it by `on_mcp_loop`. At interpreter exit (a kernel shutting down) every
connection still open is closed here, while the thread still runs.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["live", "mcp_loop", "on_mcp_loop"]

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
CLOSE_AT_EXIT_S = 10.0

live: dict[int, Callable[[], Awaitable[None]]] = {}
"""The close function of every open connection, by id; read at interpreter exit."""


def mcp_loop() -> asyncio.AbstractEventLoop:
    """The MCP loop, started with its thread on first use."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            started = threading.Event()
            thread = threading.Thread(
                target=_serve, args=(loop, started), name="thena_nb-mcp", daemon=True
            )
            thread.start()
            started.wait()
            _loop = loop
        return _loop


async def on_mcp_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Await `coro` run on the MCP loop; cancelling the caller cancels it there too."""
    future = asyncio.run_coroutine_threadsafe(coro, mcp_loop())
    return await asyncio.wrap_future(future)


def _serve(loop: asyncio.AbstractEventLoop, started: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(started.set)
    loop.run_forever()


@atexit.register
def _close_all() -> None:
    """Close the connections still open when the interpreter exits (a kernel's shutdown)."""
    loop = _loop
    if loop is None or loop.is_closed() or not live:
        return

    async def close_every() -> None:
        await asyncio.gather(*(close() for close in list(live.values())), return_exceptions=True)

    future = asyncio.run_coroutine_threadsafe(close_every(), loop)
    # Past the timeout the servers still see their stdin close as this process ends.
    with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
        future.result(timeout=CLOSE_AT_EXIT_S)
