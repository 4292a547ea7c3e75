"""`Context`: what a step, a tool or a stop condition sees of the run."""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from thena_nb.core.replay import HistoryHasher, Replay
from thena_nb.core.types import (
    Budget,
    HistoryView,
    LoopStopReason,
    Message,
    RetryPolicy,
    Turn,
    TurnInfo,
    Usage,
)

if TYPE_CHECKING:
    from thena_nb.core.report import ReportNode, Run
    from thena_nb.core.session import Event
    from thena_nb.core.steps import LoopStep

__all__ = ["Context", "RunRecorder", "current_run", "current_run_id"]

_current_run: contextvars.ContextVar[Run | None] = contextvars.ContextVar(
    "thena_nb_run", default=None
)


def current_run() -> Run | None:
    """The run being executed in this task, or `None` outside a run.

    Offline models key their position on it, so that every run starts its script again.
    """
    return _current_run.get()


def current_run_id() -> str | None:
    """The id of the run being executed in this task, or `None` outside a run."""
    run = _current_run.get()
    return run.run_id if run is not None else None


@dataclass(eq=False)
class LoopFrame:
    """The running state of one loop: its counters and its own turns."""

    step: LoopStep
    node: ReportNode
    path: str
    iteration: int = 0
    consecutive: int = 0
    total: int = 0
    tool_calls: int = 0
    turns: list[Turn] = field(default_factory=list)


@dataclass(eq=False)
class Scope:
    """Where turns and messages are recorded: the run itself, or one parallel branch.

    A branch starts from copies of its parent's history and turns (S3) and adds its own
    after `base_turns` / `base_messages`; the block merges them back in declaration order.
    """

    history: list[Message]
    turns: list[Turn]
    base_turns: int = 0
    base_messages: int = 0
    branch: int | None = None
    """The 0-based position in the innermost parallel block; `None` for the run itself."""
    hasher: HistoryHasher = field(default_factory=HistoryHasher)
    """The running fingerprint of `history`, for request keys."""


class RunControl:
    """Run-wide state shared by every context of one run: the stop flag, budget, retries,
    event subscribers and the session's gate before each model call."""

    __slots__ = (
        "budget",
        "checkpoint",
        "on_turn",
        "recorder",
        "replay",
        "rescue_seq",
        "retry",
        "run",
        "stop_requested",
        "subscribers",
    )

    def __init__(
        self,
        run: Run,
        *,
        budget: Budget | None,
        retry: RetryPolicy,
        checkpoint: Callable[[], Any] | None = None,
        replay: Replay | None = None,
        recorder: RunRecorder | None = None,
    ) -> None:
        self.run = run
        self.replay = replay
        self.recorder = recorder
        self.budget = budget
        self.retry = retry
        self.checkpoint = checkpoint
        self.stop_requested = False
        self.rescue_seq = 0
        self.subscribers: list[Callable[[Event], Any]] = []
        self.on_turn: list[Callable[[Turn], Any]] = []

    def emit(self, event: Event) -> None:
        for fn in list(self.subscribers):
            fn(event)

    async def record(self, turn: Turn, state: Any) -> None:
        """A turn has joined the run: snapshot the state, tell listeners, persist it (S28)."""
        run = self.run
        if isinstance(state, BaseModel):
            run.states[turn.index] = state.model_dump(mode="json")
        elif isinstance(state, dict):
            run.states[turn.index] = dict(state)
        for hook in self.on_turn:
            hook(turn)
        if self.recorder is not None:
            await self.recorder.turn_recorded(run, turn)


class RunRecorder(Protocol):
    """Something that keeps runs as they happen, e.g. a run store (S28).

    `turn_recorded` is awaited before the next turn starts; the state snapshot after the turn
    is `run.states.get(turn.index)`.
    """

    async def run_started(self, run: Run) -> None:
        """A run is about to take its first step."""
        ...

    async def turn_recorded(self, run: Run, turn: Turn) -> None:
        """A turn has finished and joined the run."""
        ...

    async def run_finished(self, run: Run) -> None:
        """The run has ended (`run.status` says how)."""
        ...


class Context:
    """What a step, tool or stop condition sees of the run.

    Attributes:
        output: The last turn's text, or the last function step's return value.
        turn: The last turn's `TurnInfo` (`None` before any turn).
        state: The workflow's state object (`None` when the workflow has no `state=`).
    """

    __slots__ = ("_control", "_loops", "_scope", "last_loop_stop_reason", "output", "state", "turn")

    def __init__(
        self,
        control: RunControl,
        scope: Scope,
        *,
        state: Any = None,
        loops: list[LoopFrame] | None = None,
    ) -> None:
        self._control = control
        self._scope = scope
        self._loops: list[LoopFrame] = loops if loops is not None else []
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
        return self._loops[-1].iteration if self._loops else None

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
        return self._loops[-1].tool_calls if self._loops else 0

    @property
    def loop_turns(self) -> Sequence[Turn]:
        """The innermost running loop's own turns (all turns outside loops)."""
        return self._loops[-1].turns if self._loops else self.turns

    def stop(self) -> None:
        """Ask the run to stop at the next boundary; every open loop records `stop`."""
        self._control.stop_requested = True

    def branch(self, scope: Scope) -> Context:
        """A context for one parallel branch: same run, state and loops, its own scope."""
        child = Context(self._control, scope, state=self.state, loops=list(self._loops))
        child.output = self.output
        child.turn = self.turn
        child.last_loop_stop_reason = self.last_loop_stop_reason
        return child

    def __repr__(self) -> str:
        return (
            f"Context(run_id={self.run_id!r}, turns={len(self._scope.turns)}, "
            f"iteration={self.iteration!r})"
        )
