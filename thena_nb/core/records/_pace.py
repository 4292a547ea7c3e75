"""The cyclic garbage collector's thresholds, raised for a block and put back after.

Blocks that make many long-lived objects raise the thresholds while they work: a run going
to its end (`core/_collector.py`) and a stored run being decoded (`store/base.py`). They
may nest (a replay loads a stored run inside a run) and overlap (runs and loads on several
threads), so they share one change: while any block is open the thresholds are, generation
by generation, the highest of the ones found before the first block began and every open
block's; when the last block ends the ones found are put back. Thresholds are only ever
raised, and a generation whose threshold was 0 (collection turned off that way) stays so.
`gc.disable()` is left alone: a collector turned off stays off.
"""

from __future__ import annotations

import gc
import threading
from collections import Counter

__all__ = ["RaisedThresholds", "Thresholds", "raised_thresholds"]

Thresholds = tuple[int, int, int]

_lock = threading.Lock()
_open: Counter[Thresholds] = Counter()
"""The thresholds of every open block, with how many blocks asked for each."""
_found: Thresholds | None = None
"""The thresholds before the first open block began."""


class RaisedThresholds:
    """The block `raised_thresholds` gives: a class, not a generator, as every run enters one."""

    __slots__ = ("thresholds",)

    def __init__(self, thresholds: Thresholds) -> None:
        self.thresholds = thresholds

    def __enter__(self) -> None:
        global _found
        with _lock:
            if not _open:
                _found = gc.get_threshold()
            _open[self.thresholds] += 1
            _apply()

    def __exit__(self, *exc: object) -> None:
        global _found
        with _lock:
            _open[self.thresholds] -= 1
            if _open[self.thresholds] <= 0:
                del _open[self.thresholds]
            _apply()
            if not _open:
                _found = None


def _apply() -> None:
    """Set the thresholds the open blocks ask for (call with the lock held)."""
    assert _found is not None
    a, b, c = _found
    if a != 0:  # (a threshold of 0 turns automatic collection off: it stays off)
        for x, y, z in _open:
            a, b, c = max(a, x), max(b, y), max(c, z)
    if gc.get_threshold() != (a, b, c):
        gc.set_threshold(a, b, c)


def raised_thresholds(thresholds: Thresholds) -> RaisedThresholds:
    """A `with` block during which the collector's thresholds are at least `thresholds`
    (nested and overlapping blocks share one change, undone when the last ends).

    Example:
        >>> import gc
        >>> before = gc.get_threshold()
        >>> with raised_thresholds((0, 0, 10**9)):
        ...     gc.get_threshold()[2] == 10**9
        True
        >>> gc.get_threshold() == before
        True
    """
    return RaisedThresholds(thresholds)
