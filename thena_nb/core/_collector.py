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

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["RUN_THRESHOLDS", "fewer_collections"]

RUN_THRESHOLDS = (50_000, 50, 50)
"""`gc.set_threshold` values while runs go to their end (each only if above the current one)."""

_lock = threading.Lock()
_entered = 0
_saved: tuple[int, int, int] | None = None


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Raise the collector's thresholds for the block (nested and concurrent blocks share
    one change, undone when the last ends). A collector turned off stays off.

    Example:
        >>> import gc
        >>> before = gc.get_threshold()
        >>> with fewer_collections():
        ...     gc.get_threshold()[0] >= before[0]
        True
        >>> gc.get_threshold() == before
        True
    """
    global _entered, _saved
    with _lock:
        if _entered == 0:
            _saved = gc.get_threshold()
            raised = (max(a, b) for a, b in zip(_saved, RUN_THRESHOLDS, strict=True))
            gc.set_threshold(*raised)
        _entered += 1
    try:
        yield
    finally:
        with _lock:
            _entered -= 1
            if _entered == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None
