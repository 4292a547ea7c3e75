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

from thena_nb.core.records._pace import RaisedThresholds, raised_thresholds

__all__ = ["RUN_THRESHOLDS", "fewer_collections"]

RUN_THRESHOLDS = (50_000, 50, 50)
"""`gc.set_threshold` values while runs go to their end (each only if above the current one)."""

_BLOCK = raised_thresholds(RUN_THRESHOLDS)


def fewer_collections() -> RaisedThresholds:
    """Raise the collector's thresholds for a `with` block (nested and concurrent blocks,
    and a stored run's load, share one change, undone when the last ends: `records/_pace`).
    A collector turned off stays off.

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
