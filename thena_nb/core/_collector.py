"""The cyclic garbage collector's pace while runs go to their end.

Every turn makes objects that live as long as its run, so the young collections scan them
again and again, and each full collection walks the whole run so far: at 10,000 turns the
full collections took a third of the run's time, and at 1,000 runs in flight in an
experiment the collector took a third of its time too. Runs make no reference cycles, so
collecting less often frees the same memory. While a run goes to its end (`wf.run`,
`wf.arun`) or an experiment runs, the collector's thresholds are raised (never lowered),
and they are put back when the last such block ends. A stepping session, which may wait
for a person for hours, leaves them alone.
"""

from __future__ import annotations

import gc
import threading

__all__ = ["RUN_THRESHOLDS", "fewer_collections"]

RUN_THRESHOLDS = (50_000, 50, 50)
"""`gc.set_threshold` values while runs go to their end (each only if above the current one)."""

_lock = threading.Lock()
_entered = 0
_saved: tuple[int, int, int] | None = None


class _FewerCollections:
    """`fewer_collections()`'s block: a class, not a generator, as every run enters one."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _entered, _saved
        with _lock:
            if _entered == 0:
                saved = _saved = gc.get_threshold()
                if saved != RUN_THRESHOLDS:
                    a, b, c = saved
                    x, y, z = RUN_THRESHOLDS
                    gc.set_threshold(a if a > x else x, b if b > y else y, c if c > z else z)
            _entered += 1

    def __exit__(self, *exc: object) -> None:
        global _entered, _saved
        with _lock:
            _entered -= 1
            if _entered == 0 and _saved is not None:
                if _saved != RUN_THRESHOLDS:
                    gc.set_threshold(*_saved)
                _saved = None


_BLOCK = _FewerCollections()


def fewer_collections() -> _FewerCollections:
    """Raise the collector's thresholds for a `with` block (nested and concurrent blocks
    share one change, undone when the last ends). A collector turned off stays off.

    Example:
        >>> import gc
        >>> before = gc.get_threshold()
        >>> with fewer_collections():
        ...     gc.get_threshold()[0] >= before[0]
        True
        >>> gc.get_threshold() == before
        True
    """
    return _BLOCK
