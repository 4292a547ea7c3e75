"""`Context`: what a step, a tool or a stop condition sees of the run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from thena_nb.core.records.types import HistoryView, LoopStopReason, Message, Turn, TurnInfo, Usage

__all__ = ["Context", "Where"]


class _Run(Protocol):
    @property
    def usage(self) -> Usage: ...
    @property
    def run_id(self) -> str: ...


class _Control(Protocol):
    stop_requested: bool

    @property
    def run(self) -> _Run: ...


class _Scope(Protocol):
    @property
    def history(self) -> Sequence[Message]: ...
    @property
    def turns(self) -> Sequence[Turn]: ...


class _Loop(Protocol):
    @property
    def iteration(self) -> int: ...
    @property
    def tool_calls(self) -> int: ...
    @property
    def turns(self) -> Sequence[Turn]: ...


class Where(Protocol):
    """What a context reads of where it stands (the engine's `Position`): the run's control,
    the scope (history and turns) and the open loops."""

    @property
    def control(self) -> _Control: ...
    @property
    def scope(self) -> _Scope: ...
    @property
    def loops(self) -> Sequence[_Loop]: ...


class Context:
    """What a step, tool or stop condition sees of the run.

    A context is a view: the engine keeps the run's state, and a parallel branch has a
    context of its own (its own history view, the same state object).

    Attributes:
        output: The last turn's text, or the last function step's return value.
        turn: The last turn's `TurnInfo` (`None` before any turn).
        state: The workflow's state object (`None` when the workflow has no `state=`).
        last_loop_stop_reason: The stop reason of the loop that ended most recently.
    """

    __slots__ = ("_control", "_loops", "_scope", "last_loop_stop_reason", "output", "state", "turn")

    def __init__(self, at: Where, *, state: Any = None) -> None:
        # What the context reads of its position, not the position itself: a position
        # holds its context, and a run should hold no reference cycle.
        self._control, self._scope, self._loops = at.control, at.scope, at.loops
        self.state = state
        self.output: Any = None
        self.turn: TurnInfo | None = None
        self.last_loop_stop_reason: LoopStopReason | None = None

    @property
    def history(self) -> Sequence[Message]:
        """The history as this step sees it (a parallel branch sees its own view)."""
        return HistoryView(self._scope.history)

    @property
    def turns(self) -> Sequence[Turn]:
        """Every turn recorded so far that this step can see, in order."""
        return HistoryView(self._scope.turns)

    @property
    def iteration(self) -> int | None:
        """The 1-based iteration of the innermost running loop; `None` outside loops."""
        loops = self._loops
        return loops[-1].iteration if loops else None

    @property
    def usage(self) -> Usage:
        """Tokens, model calls and tool calls used by the whole run so far."""
        return self._control.run.usage

    @property
    def run_id(self) -> str:
        """The id of this run."""
        return self._control.run.run_id

    @property
    def loop_tool_calls(self) -> int:
        """Tool calls made since the innermost running loop began (0 outside loops)."""
        loops = self._loops
        return loops[-1].tool_calls if loops else 0

    @property
    def loop_turns(self) -> Sequence[Turn]:
        """The innermost running loop's own turns (all turns outside loops)."""
        loops = self._loops
        return loops[-1].turns if loops else self.turns

    def stop(self) -> None:
        """Ask the run to stop at the next boundary; every open loop records `stop`."""
        self._control.stop_requested = True

    def __repr__(self) -> str:
        return (
            f"Context(run_id={self.run_id!r}, turns={len(self._scope.turns)}, "
            f"iteration={self.iteration!r})"
        )
