"""A tool call's time limit, and the threads sync tools run in when they may be left behind.

Only a call whose tool has a limit (`@tool(timeout=...)`, `Workflow(tool_timeout=...)`) or
is `blocking=True` comes here; any other sync tool runs inline, as before. A sync tool
cannot be interrupted: past its limit, or when `Session.stop()` cancels its call, its
thread is abandoned (a daemon thread, so it never keeps the process alive) and whatever it
returns later is dropped.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio  # imported by the two functions that run: `import thena_nb` defers it

__all__ = ["TimedOut", "checked_timeout", "in_thread", "within"]


class TimedOut(Exception):
    """A tool call ran past its limit (never raised to the caller: it becomes the call's
    error observation)."""

    def __init__(self, limit: float, *, abandoned: bool, set_by: str = "") -> None:
        super().__init__(limit)
        self.limit = limit
        self.abandoned = abandoned
        """The tool runs in a thread that was left running (a sync tool)."""
        self.set_by = set_by
        """Where the limit was set, as the message names it (`Workflow(tool_timeout=...)`)."""


def checked_timeout(value: Any, where: str) -> float | None:
    """`value` as a time limit in seconds (`None`: no limit); a clear error otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(
            f"{where}: `timeout` must be a positive number of seconds or None, got {value!r} "
            f"(e.g. `timeout=30`)"
        )
    if math.isinf(value):
        return None
    return float(value)


async def within(work: Awaitable[str], limit: float, *, abandoned: bool, set_by: str = "") -> str:
    """`await work`, cancelled past `limit` seconds (`TimedOut`, naming `set_by`); a
    `TimeoutError` the tool raised itself stays the tool's own."""
    import asyncio

    scope = asyncio.timeout(limit)
    try:
        async with scope:
            return await work
    except TimeoutError:
        if scope.expired():
            raise TimedOut(limit, abandoned=abandoned, set_by=set_by) from None
        raise


async def in_thread(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` in a daemon thread of its own, with this task's context
    variables; cancelling the await abandons the thread (its outcome is dropped)."""
    import asyncio

    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def work() -> None:
        try:
            outcome: tuple[bool, Any] = (True, context.run(fn, *args, **kwargs))
        except BaseException as exc:  # handed to the awaiting task, which decides
            outcome = (False, exc)
        # A closed event loop raises: nobody waits for this call any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle, future, outcome)

    name = f"thena_nb-tool-{getattr(fn, '__name__', 'call')}"
    threading.Thread(target=work, name=name, daemon=True).start()
    return await future


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.done():
        return  # abandoned: timed out or stopped
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
