"""The Stepper on a recorded run: the `RecordedSession` that `thena_nb.stepper(run)` opens.

Any `Run` opens in the Stepper's view mode: one loaded from a store (`Run.load`), a fork,
one read from JSON or imported from another tool, one of another framework's agent. The
Stepper reads a source through the face of a `Session` (`result`, `done`, `pending`,
`open_loops`, `subscribe`, ...); `RecordedSession` is that face for a run nothing drives
any more: a session that has ended, so every control that needs a live one stays off,
while the views (scrubbing, what the model was sent, reasoning, tools, the frame, the
chart, what-if) read the run as they read a live one. "Fork from here" turns the view into
a live session (`_stepper_gates.live_fork_session`) when the run's workflow is at hand.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from thena_nb.core.engine.gates import GateError
from thena_nb.core.engine.session import OpenLoop
from thena_nb.core.records.decisions import Decision, PendingCall
from thena_nb.core.runs.run import Run
from thena_nb.core.workflow import Workflow

if TYPE_CHECKING:
    import asyncio

    from thena_nb.core.parts.context import Context
    from thena_nb.core.records.events import Event
    from thena_nb.core.records.types import ToolCall, Turn
    from thena_nb.core.store.base import RunStore

__all__ = ["RecordedSession", "workflow_for"]


def workflow_for(run: Run, workflow: Any) -> Workflow | None:
    """The workflow that forks `run`: `workflow` (an agent made a one-step workflow named as
    the run's), or else the run's own, or `None` when neither is at hand.

    Raises:
        TypeError: `workflow` is neither a `Workflow` nor an agent `Workflow.of` takes.
    """
    if workflow is None:
        found = run.workflow
        return found if isinstance(found, Workflow) else None
    if isinstance(workflow, Workflow):
        return workflow
    try:
        return Workflow.of(workflow, name=run.workflow_name)
    except TypeError as exc:
        raise TypeError(
            f"`workflow=` takes the run's `Workflow` or the agent it ran, got {workflow!r}"
        ) from exc


class RecordedSession:
    """A recorded run as the Stepper reads a session: one that has ended, with nothing left
    to run, decide or stop.

    Args:
        run: The run shown.
        workflow: The workflow that forks it, or `None` (forking is then off).
        store: Where a fork is kept (`None`: the default store; `False`: none).

    Example:
        >>> from thena_nb import Agent, Workflow
        >>> from thena_nb.models import ScriptedModel
        >>> run = Workflow("hi", [Agent("A", model=ScriptedModel(["hello"]))]).run(
        ...     "go", store=False)
        >>> RecordedSession(run, workflow=None)
        RecordedSession('hi', finished, turns=1, workflow=None)
    """

    done = True
    """Always: a view has nothing left to run."""
    paused = False
    running = False
    context: Context | None = None
    """No live context: the run's loops are not open."""
    breakpoint_hit: Turn | None = None
    paused_at: None = None

    def __init__(
        self,
        run: Run,
        *,
        workflow: Workflow | None,
        store: RunStore | Literal[False] | None = None,
    ) -> None:
        self.result = run
        self.workflow = workflow
        """The workflow a fork runs with, or `None`."""
        self.store = store
        """Where a fork is kept."""
        self.task: asyncio.Task[None] | None = None
        self.breakpoints: list[Callable[[Turn], Any]] = []
        self.gates: list[Callable[[ToolCall], Any]] = []

    @property
    def can_fork(self) -> bool:
        """Whether "fork from here" can start a live session (a workflow is at hand)."""
        return self.workflow is not None

    @property
    def pending(self) -> list[PendingCall]:
        """No call waits here: a waiting run's calls are decided with `wf.resume`."""
        return []

    @property
    def open_loops(self) -> list[OpenLoop]:
        """None: the run's loops are not running."""
        return []

    def subscribe(self, fn: Callable[[Event], Any]) -> Callable[[], None]:
        """Nothing happens in a view, so `fn` is never called; returns its unsubscribe."""
        return lambda: None

    async def step(self) -> Turn | None:
        """`None`: the run has no next turn here (fork it to go on)."""
        return None

    async def run(self) -> Run:
        """The run, as it is."""
        return self.result

    def pause(self) -> None:
        """Nothing runs, so nothing pauses."""

    def stop(self) -> None:
        """Nothing runs, so nothing stops."""

    def decide(self, call_id: str, decision: Decision) -> None:
        """Raises `GateError`: no call waits for a decision in a view."""
        raise GateError(
            f"no call {call_id!r} waits for a decision: this Stepper views run "
            f"{self.result.run_id!r}; a waiting run goes on with `wf.resume(run_id, "
            f"decisions=...)`"
        )

    def __repr__(self) -> str:
        wf = self.workflow.name if self.workflow is not None else None
        return (
            f"RecordedSession({self.result.workflow_name!r}, {self.result.status}, "
            f"turns={len(self.result.turns)}, workflow={wf!r})"
        )
