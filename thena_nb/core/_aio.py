"""Run a coroutine to completion from sync code, also under Jupyter's running event loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from thena_nb.core import _portals

T = TypeVar("T")

__all__ = ["run_sync"]


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` and return its result.

    With no event loop running in this thread it uses `asyncio.run`. Under a running loop
    (a Jupyter kernel) it runs the coroutine on a fresh loop in a worker thread and waits,
    without patching asyncio. Either way a keyboard interrupt cancels the coroutine and
    re-raises once it has unwound, so the run keeps every finished turn, with the partial
    run as the interrupt's `run` (as the cancellation carried it).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        running = False
    else:
        running = True
    return _run_in_thread(coro) if running else _run_here(coro)


def _run_here(coro: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(coro)`: its SIGINT handler cancels the coroutine and raises a fresh
    `KeyboardInterrupt`, which is handed the run the cancellation carried."""
    kept: list[Any] = []

    async def keeping() -> T:
        try:
            return await coro
        except asyncio.CancelledError as exc:
            kept.append(getattr(exc, "run", None))
            raise

    try:
        return asyncio.run(keeping())
    except KeyboardInterrupt as interrupt:
        if kept and kept[0] is not None:
            interrupt.run = kept[0]  # type: ignore[attr-defined]  # what finished is kept
            _portals.interrupted()
        raise


def _run_in_thread(coro: Coroutine[Any, Any, T]) -> T:
    loop = asyncio.new_event_loop()
    result: concurrent.futures.Future[T] = concurrent.futures.Future()
    task_box: list[asyncio.Task[T]] = []

    def worker() -> None:
        asyncio.set_event_loop(loop)
        try:
            task = loop.create_task(coro)
            task_box.append(task)
            result.set_result(loop.run_until_complete(task))
        except BaseException as exc:
            result.set_exception(exc)
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    thread = threading.Thread(target=worker, name="thena_nb-run", daemon=True)
    thread.start()
    try:
        return result.result()
    except KeyboardInterrupt as interrupt:
        if task_box:
            loop.call_soon_threadsafe(task_box[0].cancel)
        thread.join()
        cancelled = result.exception() if result.done() else None
        run = getattr(cancelled, "run", None)
        if run is not None:
            interrupt.run = run  # type: ignore[attr-defined]  # what finished is kept
            _portals.interrupted()
        raise
