"""Group commit: the writes of many runs at once, committed together once per loop pass.

A lone run commits each turn as it is written. When several runs write to one store at
once (an experiment), each write joins one open transaction, in a savepoint of its own, and
waits; a callback the event loop runs after the writes of the current pass commits them all
at once and wakes every writer. A write still returns only once it is committed, so a turn
is stored before its run's next turn starts (S28), at the cost of one commit per loop pass
instead of one per write. Anything else the store does first commits the open batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["CommitBatch"]


class CommitBatch:
    """The open batch of one store: the loop it belongs to and its waiting writers.

    Used under the store's lock; `settle` may be called from any thread.
    """

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self._waiters: list[asyncio.Future[None]] = []

    def start(self, loop: asyncio.AbstractEventLoop, commit: Callable[[], None]) -> None:
        """Open the batch on `loop` (the caller has begun the transaction); `commit` runs
        on the loop's next pass."""
        self.loop = loop
        loop.call_soon(commit)

    def join(self) -> asyncio.Future[None]:
        """A future, on the batch's loop, done once the batch is committed."""
        assert self.loop is not None, "join() on a batch that is not open"
        done: asyncio.Future[None] = self.loop.create_future()
        self._waiters.append(done)
        return done

    def take(self) -> tuple[asyncio.AbstractEventLoop | None, list[asyncio.Future[None]]]:
        """Close the batch: its loop (None when none was open) and its waiters."""
        loop, waiters = self.loop, self._waiters
        self.loop, self._waiters = None, []
        return loop, waiters


def settle(
    loop: asyncio.AbstractEventLoop,
    waiters: list[asyncio.Future[None]],
    error: Callable[[], BaseException] | None,
) -> None:
    """Wake `waiters` (on their loop, whichever thread calls): done, or failed with a fresh
    `error()` each, so that no two runs share one exception object."""

    def wake() -> None:
        for done in waiters:
            if done.done():  # its writer was cancelled meanwhile
                continue
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error())

    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        wake()
    elif not loop.is_closed():
        loop.call_soon_threadsafe(wake)
