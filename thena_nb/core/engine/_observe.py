"""The one hook through which something outside the core watches runs (telemetry).

`observer` is `None` unless something installed one (`thena_nb.telemetry.instrument`), and
every place of the engine that reports to it checks that slot first, so an uninstrumented
run pays one attribute check per place and nothing else. The core never imports what
implements an `Observer`; it only calls these methods, in the task that runs the step:

- `run_started` / `run_finished`: `Session._drive`, around the whole run;
- `loop_started` / `loop_finished`: `run_loop`, around one loop;
- `turn_started` / `turn_finished` / `turn_failed`: `take_turn`, after the gate;
- each model attempt, retries included: `call_model` calls `watched(model).respond`;
- `tool_started` / `tool_finished`: `_run_one`, around a tool that runs live (a replayed
  turn's recorded results are served without it).

Parallel branches run as tasks of their own, so an observer that keeps "where it is" in a
`contextvars.ContextVar` sees each branch apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from thena_nb.core.engine._reply_check import reply_error
from thena_nb.core.records.model import Reply

if TYPE_CHECKING:
    from thena_nb.core.engine._run_state import LoopFrame, Position
    from thena_nb.core.parts.agent import Agent
    from thena_nb.core.records.model import Model, ModelRequest
    from thena_nb.core.records.report import ReportNode
    from thena_nb.core.records.types import ToolCall, Turn
    from thena_nb.core.runs.run import Run

__all__ = ["Observer", "observer", "set_observer", "watched"]


class Observer:
    """What the engine tells an observer (each method does nothing here; override those you
    need). Every method must return quickly and must not raise."""

    def run_started(self, run: Run) -> None:
        """A run starts (`Session._drive`)."""

    def run_finished(self, run: Run, exc: BaseException | None) -> None:
        """A run ended: `run.status` is set; `exc` is what failed it, if anything."""

    def loop_started(self, frame: LoopFrame) -> None:
        """A loop starts (`run_loop`)."""

    def loop_finished(self, frame: LoopFrame) -> None:
        """A loop ended: `frame.node` has its stop reason, iterations or error."""

    def turn_started(
        self, agent: Agent, at: Position, node: ReportNode, recorded: Turn | None
    ) -> None:
        """A turn passed its gate; `recorded` is the turn a replay serves, else `None`."""

    def turn_finished(self, node: ReportNode, turn: Turn) -> None:
        """The turn's record is made (just before it is recorded)."""

    def turn_failed(self, node: ReportNode, exc: BaseException) -> None:
        """The turn's model phase raised `exc` (after its retries)."""

    def attempt_started(self, model: Model, sent: ModelRequest) -> Any:
        """One model attempt starts; returns a handle for its end."""

    def attempt_finished(self, handle: Any, reply: Reply) -> None:
        """The attempt answered `reply`."""

    def attempt_failed(self, handle: Any, exc: BaseException) -> None:
        """The attempt raised `exc` (it may be retried)."""

    def tool_started(self, agent: Agent, call: ToolCall) -> None:
        """A tool call starts running live."""

    def tool_finished(self, call: ToolCall, done: ToolCall) -> None:
        """The call `call` finished as `done`."""


observer: Observer | None = None
"""The installed observer, or `None` (nothing is reported)."""


def set_observer(new: Observer | None) -> Observer | None:
    """Install `new` (or none) and return the observer it replaces."""
    global observer
    old, observer = observer, new
    return old


class _Watched:
    """A model whose every `respond` is reported to the observer as one attempt."""

    __slots__ = ("_model", "_observer", "name")

    def __init__(self, model: Model, watcher: Observer) -> None:
        self._model = model
        self._observer = watcher
        self.name = model.name

    async def respond(self, request: ModelRequest) -> Reply:
        handle = self._observer.attempt_started(self._model, request)
        try:
            reply = await self._model.respond(request)
        except BaseException as exc:
            self._observer.attempt_failed(handle, exc)
            raise
        if type(reply) is not Reply:  # the turn raises this error, naming the turn
            where = f"agent {request.agent!r}: model {self.name!r}"
            error = reply_error(reply, model=self.name, where=where)
            if error is not None:
                self._observer.attempt_failed(handle, error)
                return reply
        self._observer.attempt_finished(handle, reply)
        return reply


def watched(model: Model) -> Model:
    """`model` reporting each attempt to the installed observer (itself when there is none)."""
    return model if observer is None else _Watched(model, observer)
