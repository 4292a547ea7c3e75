"""Run a coroutine to completion from sync code, also under Jupyter's running event loop."""

from __future__ import annotations

# `_signal` is what `signal` wraps in enum conversions that cost more than a one-turn
# run's set-up; every `wf.run()` installs its Ctrl-C handler and puts the default back.
import _signal  # type: ignore[import-not-found]
import asyncio
import atexit
import concurrent.futures
import contextlib
import inspect
import signal
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from thena_nb.core import _portals

T = TypeVar("T")

__all__ = ["close_at_loop_end", "owns_loop", "run_sync"]


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` and return its result.

    With no event loop running in this thread it runs `coro` on this thread's own loop,
    made once and reused by later calls (`_run_here`). Under a running loop (a Jupyter
    kernel) it runs the coroutine on a fresh loop in a worker thread and waits, without
    patching asyncio. Either way a keyboard interrupt cancels the coroutine and re-raises
    once it has unwound, with the partial run as `exc.run`: it keeps every finished turn.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        running = False
    else:
        running = True
    return _run_in_thread(coro) if running else _run_here(coro)


_local = threading.local()
_SIGINT = int(signal.SIGINT)


def _own_loop() -> asyncio.AbstractEventLoop:
    """This thread's loop for `run_sync`: made on first use, closed at exit."""
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is None or loop.is_closed():
        loop = _local.loop = asyncio.new_event_loop()
        _ours.add(loop)
        atexit.register(_close, loop)
    return loop


def _close(loop: asyncio.AbstractEventLoop) -> None:
    if not loop.is_closed() and not loop.is_running():
        loop.run_until_complete(_ending(loop))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


_ours: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
"""The loops `run_sync` made, which run `close_at_loop_end`'s closers before they close."""
_at_end: dict[asyncio.AbstractEventLoop, list[Callable[[], Callable[[], Awaitable[Any]] | None]]]
_at_end = {}


def close_at_loop_end(loop: asyncio.AbstractEventLoop, close: Callable[[], Awaitable[Any]]) -> None:
    """Await `close()` on `loop` just before it closes, when `run_sync` made the loop: the
    fresh loop of a run under a running loop (a notebook's `wf.run()`), or a thread's reused
    loop at exit. For what lives as long as its loop, such as a model's connection pool:
    connections belong to the loop that opened them and cannot be closed once it has.

    For a loop made elsewhere (`asyncio.run`) it does nothing: `close` is not kept, so
    nothing it holds (a pool holds its loop) outlives the loop. A bound method is kept
    weakly: what it belongs to is closed only if something still holds it then, so a model
    dropped early takes its pool with it instead of leaving it here until the loop ends.

    Example:
        >>> async def main() -> None:
        ...     async def close() -> None:
        ...         print("closed")
        ...     close_at_loop_end(asyncio.get_running_loop(), close)
        >>> asyncio.run(main())  # a loop `run_sync` did not make: nothing is printed
    """
    if owns_loop(loop):
        held = weakref.WeakMethod(close) if inspect.ismethod(close) else (lambda: close)
        _at_end.setdefault(loop, []).append(held)


def owns_loop(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether `run_sync` made `loop` (and so runs `close_at_loop_end`'s closers)."""
    return loop in _ours


async def _ending(loop: asyncio.AbstractEventLoop) -> None:
    """What `close_at_loop_end` registered for `loop`, each awaited once; a failure to close
    does not stop the others."""
    for held in _at_end.pop(loop, []):
        close = held()
        if close is None:
            continue  # its owner is gone, and its pool with it
        with contextlib.suppress(Exception):
            await close()


def _run_here(coro: Coroutine[Any, Any, T]) -> T:
    """`coro` on this thread's reused loop, as `asyncio.run` would run it on a new one: a
    Ctrl-C while it waits on I/O cancels it (a second one interrupts at once), one while it
    computes interrupts it there, and tasks it left behind are cancelled when it ends.
    Reusing the loop spares every `wf.run()` a loop's start-up."""
    loop = _own_loop()
    task = loop.create_task(coro)
    interrupted = False
    raised_in: list[asyncio.Task[Any]] = []

    def on_sigint(signum: int, frame: Any) -> None:
        nonlocal interrupted
        running = asyncio.current_task(loop)
        if interrupted or task.done() or running is not None:
            # The run is executing (not waiting on I/O): interrupt it where it is; the
            # session keeps the partial run on the exception as it unwinds.
            if running is not None:
                raised_in.append(running)
            raise KeyboardInterrupt
        interrupted = True
        loop.call_soon_threadsafe(task.cancel)

    own = threading.current_thread() is threading.main_thread() and (
        _signal.getsignal(_SIGINT) is signal.default_int_handler
    )
    if own:
        _signal.signal(_SIGINT, on_sigint)
    try:
        return loop.run_until_complete(task)
    except asyncio.CancelledError as cancelled:
        if not interrupted:
            raise
        interrupt = KeyboardInterrupt()
        interrupt.run = getattr(cancelled, "run", None)  # type: ignore[attr-defined]
        if interrupt.run is not None:  # type: ignore[attr-defined]
            _portals.interrupted()
        raise interrupt from None
    except KeyboardInterrupt as interrupt:
        if getattr(interrupt, "run", None) is not None:  # raised inside the run, which kept it
            _portals.interrupted()
        raise
    finally:
        if own:
            _signal.signal(_SIGINT, signal.default_int_handler)
        _cancel_leftovers(loop, raised_in)


def _cancel_leftovers(loop: asyncio.AbstractEventLoop, raised_in: list[asyncio.Task[Any]]) -> None:
    """Cancel the tasks a run left on the loop, as `asyncio.run` does when it ends; the
    tasks a Ctrl-C interrupted have their exception retrieved (it is the one raised)."""
    for t in raised_in:
        if t.done() and not t.cancelled():
            t.exception()
    left = [t for t in asyncio.all_tasks(loop) if not t.done()]
    if not left:
        return
    for t in left:
        t.cancel()
    loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))


def _run_in_thread(coro: Coroutine[Any, Any, T]) -> T:
    loop = asyncio.new_event_loop()
    _ours.add(loop)
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
                loop.run_until_complete(_ending(loop))
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
