"""Private control flow that never leaves the executor (outside the error tree)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from thena_nb.core.engine._run_state import LoopFrame
    from thena_nb.core.records.types import LoopStopReason


class Halt(BaseException):
    """The whole run ends: a stop was requested or the budget is spent."""

    def __init__(self, reason: LoopStopReason, detail: str = "") -> None:
        super().__init__(reason, detail)
        self.reason: LoopStopReason = reason
        self.detail = detail


class LoopBreak(BaseException):
    """One loop (and the loops inside it) stops at once, e.g. on `fails`."""

    def __init__(self, frame: LoopFrame, reason: LoopStopReason) -> None:
        super().__init__(reason)
        self.frame = frame
        self.reason: LoopStopReason = reason


def note_once(exc: BaseException, note: str) -> None:
    """Add `note` to `exc` unless an inner step already said where it was raised."""
    if not getattr(exc, "_thena_noted", False):
        exc.add_note(note)
        with contextlib.suppress(AttributeError):
            exc._thena_noted = True  # type: ignore[attr-defined]
