"""The cyclic garbage collector's pace while an experiment has many runs in flight.

With hundreds of runs at once, most objects a turn makes live through a young collection
(their run is still going) and are scanned again and again, then promoted, only to be freed
by reference counting soon after: at 1,000 runs in flight the collector took a third of an
experiment's time. Runs make no reference cycles, so collecting less often frees the same
memory; while at least one experiment runs, the collector's thresholds are raised (never
lowered), and they are put back when the last one ends.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["EXPERIMENT_THRESHOLDS", "fewer_collections"]

EXPERIMENT_THRESHOLDS = (50_000, 50, 50)
"""`gc.set_threshold` values while an experiment runs (each only if above the current one)."""

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
            raised = (max(a, b) for a, b in zip(_saved, EXPERIMENT_THRESHOLDS, strict=True))
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
