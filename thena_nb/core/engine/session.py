"""`Session`: the only thing that advances a run. Scripts, magics and the Stepper all use it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from thena_nb.core.engine import _observe
from thena_nb.core.engine._executor import run_steps
from thena_nb.core.engine._replay import Replay
from thena_nb.core.engine._run_state import PausePoint, Position, RunControl, Scope
from thena_nb.core.engine._signals import Halt, LoopBreak
from thena_nb.core.engine._tool_sources import close_tool_sources, closed_with
from thena_nb.core.engine.gates import Gatekeeper, Waiting
from thena_nb.core.parts.context import Context
from thena_nb.core.parts.plan import Plan
from thena_nb.core.records.decisions import Approver, Decision, PendingCall
from thena_nb.core.records.events import Event, event
from thena_nb.core.records.types import LoopStopReason, ToolCall, Turn
from thena_nb.core.runs._current import _current_run
from thena_nb.core.runs.run import INTERRUPTED, Run, remember
from thena_nb.core.store.base import RunRecorder

__all__ = ["Breakpoint", "Event", "OpenLoop", "Session"]

Breakpoint = Callable[[Turn], Any]
"""`fn(turn)`; truthy pauses a running session after that turn."""


class OpenLoop(BaseModel):
    """A loop that is running, as `Session.open_loops` shows it (outermost first)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    path: str
    """The loop's step path, e.g. `"review/1.loop"`."""
    iteration: int
    """The 1-based iteration running (or about to run) now."""
    max_iterations: int
    consecutive_fails: int
    """The loop's current streak of failed tool calls."""
    max_fails: float
    """`max_fails` of the loop (`inf` when off)."""


class Session:
    """A run you can step through: paused before the first turn until you `step()` or `run()`.

    Example:
        >>> from thena_nb import Agent, Workflow
        >>> from thena_nb.models import ScriptedModel
        >>> wf = Workflow("two", [Agent("A", model=ScriptedModel(["one"])),
        ...                       Agent("B", model=ScriptedModel(["two"]))])
        >>> import asyncio
        >>> async def walk():
        ...     s = wf.session("go")
        ...     first = await s.step()
        ...     return first.agent, (await s.run()).output
        >>> asyncio.run(walk())
        ('A', 'two')
    """

    def __init__(
        self,
        workflow: Plan,
        input: str,
        *,
        state: Any = None,
        replay: Replay | None = None,
        recorder: RunRecorder | None = None,
        run_id: str | None = None,
        approve: Approver | None = None,
        at_gate: Literal["pause", "wait"] = "pause",
        deps: Any = None,
    ) -> None:
        self.workflow = workflow
        if state is None and workflow.state is not None:
            state = workflow.state()
        self.result = Run(workflow_name=workflow.name, input=input, state=state, run_id=run_id)
        self.result.workflow = workflow
        self.breakpoints: list[Breakpoint] = []
        self.done = False
        self.exception: BaseException | None = None
        self.task: asyncio.Task[None] | None = None
        self._control = RunControl(
            self.result,
            budget=workflow.budget,
            retry=workflow.retry,
            checkpoint=self._checkpoint,
            replay=replay,
            recorder=recorder,
        )
        self._control.on_turn.append(self._after_turn)
        self._control.tool_sources = closed_with(self)  # (closed if this is dropped paused)
        self._control.tool_timeout = workflow.tool_timeout
        self._control.max_tool_result_chars = workflow.max_tool_result_chars
        self._control.deps = deps
        self.gates: list[Callable[[ToolCall], Any]] = self._control.gates
        """Predicates `fn(call) -> bool` that hold calls for a decision, beside the tools'
        own gates, e.g. `session.gates.append(lambda call: True)` for every call."""
        self._keeper = Gatekeeper(approve, self._hold_at_gate if at_gate == "pause" else None)
        self._control.gatekeeper = self._keeper
        self._control.on_branch_turn = self._branch_turn
        self._mode: Literal["step", "run"] = "step"
        self._allowed = 0
        self._break_hit: Turn | None = None
        self._pause_requested = False
        self._last_turn: Turn | None = None
        self._resume: asyncio.Future[None] | None = None
        self._waiters: list[asyncio.Future[None]] = []
        self._top: Position | None = None
        self.paused_at: PausePoint | None = None
        """Where the session waits: `"model"` (before a model call), `"tools"` (before a
        turn's tools, with `pause_before_tools` or for a tool gate), or `None` when it is not
        paused."""
        self.breakpoint_hit: Turn | None = None
        """The turn whose breakpoint paused the last `run()`, or `None`."""

    # -- public control API -------------------------------------------------------------

    async def step(self) -> Turn | None:
        """Run up to and including the next turn and return it; `None` once the run ended.

        It returns after every check that follows the turn, so a paused session always
        waits just before a model call. A `parallel` block advances one branch turn per
        step: its branches run one after another, each to its end, in declaration order,
        every branch still reading the history as the block opened (S3). A branch turn is
        returned with `branch` set and the `index` it has once the block merges; it joins
        `result.turns` when the block ends, in declaration order (S4), as with `run()`.
        """
        if self.done:
            await self._settled()
            return None
        if not self._control.stop_requested:
            self._keeper.check_decided("step()")
        self._mode = "step"
        self._allowed = 1
        self._last_turn = None
        self._control.checkpoint = self._checkpoint
        await self._advance()
        return self._last_turn

    async def run(self) -> Run:
        """Run to the end, to the next breakpoint, to a `pause()` or to a tool gate
        (`pending`); returns `result` (`done` tells which). Branches of a `parallel` block
        run at the same time (S2), also those of a block a `step()` had entered: the branch
        under way goes on, the others start."""
        if not self.done:
            self._to_run_mode()
            in_order = self._control.in_order
            if in_order is not None and not in_order[2].done():
                in_order[2].set_result(None)  # the open blocks run their branches together
            await self._advance()
        else:
            await self._settled()
        return self.result

    async def _run_to_end(self) -> Run:
        """`run()` of a new session in the calling task instead of a task of its own, for a
        caller that runs many sessions and neither pauses nor steps them (an experiment's
        worker): a task and its wake-ups fewer per run, and a run that never waits goes from
        its start to its summary in one go, instead of waiting, finished, until every other
        run started with it is done too.

        The session must be new, have no breakpoints and meet a tool gate with
        `at_gate="wait"` (it then ends `"waiting"`). `stop()` works as with `run()`;
        cancelling the calling task ends the run `"stopped"` (stored so) and goes on up.

        Raises:
            RuntimeError: The session was started already, has breakpoints, or would pause
                at a tool gate.
        """
        if self.task is not None or self.done:
            raise RuntimeError("_run_to_end() needs a new session: this one was started")
        if self.breakpoints or self._keeper.pause is not None:
            raise RuntimeError("_run_to_end() cannot pause: no breakpoints, at_gate='wait'")
        self._to_run_mode()
        self.task = asyncio.current_task()
        outer = _current_run.get()
        try:
            await self._drive()
        finally:
            _current_run.set(outer)  # the caller's task goes on: it does not keep the run
        if self.exception is not None:
            raise self.exception
        return self.result

    def _to_run_mode(self) -> None:
        """What `run()` and `_run_to_end()` set before the run goes on (pending calls decided
        first, unless it was stopped)."""
        if not self._control.stop_requested:
            self._keeper.check_decided("run()")
        self._mode = "run"
        self.breakpoint_hit = None
        self._pause_requested = self._control.pause_requested = False
        # A running session pauses only after a breakpoint fires: until then the executor
        # has no pause point to call (`_after_turn` puts it back on a hit).
        self._control.checkpoint = None

    def pause(self) -> None:
        """Pause a running session at its next pause point: before the tools of the turn
        whose model is answering now (`paused_at == "tools"`: they run when the session goes
        on), else before the next model call. The `run()` in flight then returns with
        `paused` true; `run()` or `step()` goes on from there.

        The branches of a `parallel` block that are running together have no pause points:
        a pause asked then takes effect at the first one after the block.

        Example:
            >>> import asyncio
            >>> from thena_nb import Agent, Workflow
            >>> from thena_nb.models import ScriptedModel
            >>> wf = Workflow("two", [Agent("A", model=ScriptedModel(["one"])),
            ...                       Agent("B", model=ScriptedModel(["two"]))])
            >>> async def pause_after_first():
            ...     s = wf.session("go", store=False)
            ...     s.subscribe(lambda e: s.pause() if e.kind == "turn_finished" else None)
            ...     await s.run()
            ...     return s.paused, s.paused_at, len(s.result.turns)
            >>> asyncio.run(pause_after_first())
            (True, 'model', 1)
        """
        if self.done or self.paused or self._mode != "run" or self.task is None:
            return  # not running: a stepping or new session pauses anyway
        self._pause_requested = self._control.pause_requested = True
        self._control.checkpoint = self._checkpoint

    def stop(self) -> None:
        """Stop the run. Paused, it is `done` at once; running, a model call in flight is
        cancelled (not awaited; its unfinished turn is not recorded), and so are tool calls
        in flight: an async tool is cancelled; a sync tool that runs in a thread of its own
        (`blocking=True`, or with a `timeout`) is abandoned, its thread left to finish on its
        own, and `result.error` says so; a sync tool that runs inline holds the event loop
        until it returns. A call cut short is a failed call whose observation says it was
        stopped; the turn's calls not started yet are not run; the turn is recorded.
        Every open loop records `stop`; the status becomes `"stopped"`."""
        if self.done:
            return
        control = self._control
        control.stop_requested = True
        if self.task is None:
            self._finish("stopped")
            return
        if self.paused:
            # No further model call will be made: the run is over now; the task only
            # winds down (it persists the ending; `run()` waits for that).
            self._mark_open_loops("stop")
            self._finish("stopped", announce=False)
            assert self._resume is not None
            self._resume.set_result(None)
            return
        current = _current_task()
        for at, task in list(control.tasks.items()):
            if (at.in_call or at.in_tools) and task is not current:
                task.cancel()  # not the task asking, e.g. a tool that calls `stop()`

    @property
    def pending(self) -> list[PendingCall]:
        """The gated calls the session waits on, not decided yet (see `decide`).

        When a tool gate holds calls, the session pauses after the turn's model call and
        before any of its tools (`paused_at == "tools"`), also inside `run()`; `step()` and
        `run()` raise `GateError` until every pending call is decided.

        Example:
            >>> import asyncio
            >>> from thena_nb import Agent, Decision, Workflow, tool
            >>> from thena_nb.models import ScriptedModel, reply
            >>> pay = tool(lambda amount: f"paid {amount}", name="pay", gate=True)
            >>> model = ScriptedModel([reply.tool("pay", amount=500), "Done."])
            >>> wf = Workflow("pay", [Agent("A", model=model, tools=[pay])])
            >>> async def walk():
            ...     s = wf.session("pay 500", store=False)
            ...     await s.step()  # the model call; the gate holds the call
            ...     held = s.pending[0].call
            ...     s.decide(held.id, Decision.edit({"amount": 50}))
            ...     turn = await s.step()
            ...     return held.arguments, turn.tool_calls[0].result, turn.tool_calls[0].decision
            >>> asyncio.run(walk())
            ({'amount': 500}, 'paid 50', 'edit')
        """
        return list(self._keeper.pending)

    def decide(self, call_id: str, decision: Decision) -> None:
        """Decide a pending call: `Decision.approve()`, `.edit(arguments)`, `.reject(reason)`
        or `.respond(result)`.

        Raises:
            GateError: No pending call has this id, or an edit does not fit the tool's
                schema (the call stays pending).
            TypeError: `decision` is not a `Decision`.
        """
        self._keeper.decide(call_id, decision)

    def subscribe(self, fn: Callable[[Event], Any]) -> Callable[[], None]:
        """Call `fn(event)` for every `Event` as it happens; returns an unsubscribe function."""
        self._control.subscribers.append(fn)

        def unsubscribe() -> None:
            if fn in self._control.subscribers:
                self._control.subscribers.remove(fn)

        return unsubscribe

    @property
    def paused(self) -> bool:
        """Waiting at a pause point (`paused_at`) for `step()` or `run()`."""
        return self._resume is not None and not self._resume.done()

    @property
    def running(self) -> bool:
        """A `step()` or `run()` is advancing the run right now."""
        return self.task is not None and not self.done and not self.paused

    @property
    def open_loops(self) -> list[OpenLoop]:
        """A snapshot of the loops running at this moment, outermost first, nested ones
        included, and those inside the parallel branches running now (each branch's in
        declaration order); empty before the run starts and after it ends."""
        if self._top is None or self.done:
            return []
        control = self._control
        in_order = control.in_order  # a stepping session inside a parallel branch
        # The run's own position, then every branch under way (each keeps the loops it is
        # in: those of the block's own position, shared, and its own).
        positions = [self._top, *([in_order[0]] if in_order else []), *control.tasks]
        frames = {id(f): f for at in positions for f in at.loops}.values()
        return [
            OpenLoop(
                path=f.path,
                iteration=f.iteration,
                max_iterations=f.step.max_iterations,
                consecutive_fails=f.consecutive,
                max_fails=f.step.max_fails,
            )
            for f in sorted(frames, key=lambda f: f.path.count("/"))  # (a stable sort)
        ]

    @property
    def context(self) -> Context | None:
        """The run's top-level context once the run has started."""
        return self._top.ctx if self._top is not None else None

    @property
    def pause_before_tools(self) -> bool:
        """Also pause before each turn's tools run, after its model call (off by default).

        With it on, `step()` from before a model call runs the model call and returns `None`
        with `paused_at == "tools"`; the next `step()` runs the tools and returns the turn.
        `run()` pauses there only for a breakpoint, as before a model call.
        """
        return self._control.pause_before_tools

    @pause_before_tools.setter
    def pause_before_tools(self, value: bool) -> None:
        self._control.pause_before_tools = bool(value)

    def __repr__(self) -> str:
        state = (
            "done" if self.done else "paused" if self.paused else "running" if self.task else "new"
        )
        return f"Session({self.workflow.name!r}, {state}, turns={len(self.result.turns)})"

    # -- the executor's side ------------------------------------------------------------

    async def _advance(self) -> None:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        if self.task is None:
            self.task = loop.create_task(self._drive())
            # Pending for good if the session is dropped while paused: it is collected with
            # the session then (its sources closed, `closed_with`), which is no leak to report.
            self.task._log_destroy_pending = False  # type: ignore[attr-defined]
        elif self._resume is not None and not self._resume.done():
            self._resume.set_result(None)
        await waiter
        if self.done and self.exception is not None:
            raise self.exception

    async def _checkpoint(self, where: PausePoint) -> None:
        """Called by the executor at every pause point: before every model call, and before
        a turn's tools when `pause_before_tools` is on (at the top level, and in the one
        parallel branch a stepping session runs at a time). After `stop()` it ends the run
        there (`Halt`), so nothing more of the turn runs."""
        while True:
            if self._control.stop_requested:
                raise Halt("stop")
            if self._mode == "run" and self._break_hit is None and not self._pause_requested:
                return
            if self._mode == "step" and self._allowed > 0:
                self._allowed -= 1
                return
            self.breakpoint_hit = self._break_hit
            self._break_hit = None
            self._pause_requested = self._control.pause_requested = False
            await self._paused(where)

    async def _paused(self, where: PausePoint) -> None:
        """Wait at `where` until `run()`, `step()`, a decision or `stop()` lets the run go on."""
        self._resume = asyncio.get_running_loop().create_future()
        self.paused_at = where
        self._wake()
        try:
            await self._resume
        finally:
            self._resume = None
            self.paused_at = None

    async def _hold_at_gate(self) -> None:
        """Pause before the turn's tools until the pending calls are decided (core/engine/gates.py):
        `step()` and `run()` refuse to go on before that."""
        await self._paused("tools")
        if self._control.stop_requested:
            return  # stopped while held: the turn is kept, none of its tools runs (gates.py)
        if self._mode == "step" and self._allowed > 0 and not self._control.pause_before_tools:
            self._allowed -= 1  # this step() finishes the turn (else the tools pause takes it)

    def _branch_turn(self, turn: Turn) -> None:
        self._last_turn = turn

    def _after_turn(self, turn: Turn) -> None:
        self._last_turn = turn
        control = self._control
        if control.subscribers:
            control.emit(event("turn_finished", path=turn.step_path, agent=turn.agent, turn=turn))
        if self._mode == "run" and self.breakpoints:
            for bp in self.breakpoints:
                if bp(turn):
                    self._break_hit = turn
                    control.checkpoint = self._checkpoint
                    break

    async def _drive(self) -> None:
        run = self.result
        top = self._open()
        status: Any = "finished"
        recorder = self._control.recorder
        try:
            if recorder is not None:
                await recorder.run_started(run)
            await run_steps(self.workflow.steps, top, run.report)
        except Waiting as wait:
            status = "waiting"
            run.pending, run.pending_turn = wait.pending, wait.turn
        except Halt as halt:
            status = "stopped" if halt.reason == "stop" else "budget"
            run.error = halt.detail or None
        except LoopBreak:  # pragma: no cover - every LoopBreak is caught by its own loop
            raise AssertionError("a loop break escaped its loop") from None
        except asyncio.CancelledError as exc:
            # A keyboard interrupt, or the caller's task was cancelled: stopped; a cancel
            # that says "TimeoutError: ..." (an experiment's `run_timeout`): failed so.
            timed_out = _time_limit(exc)
            status = "stopped" if timed_out is None else "failed"
            run.error = INTERRUPTED if timed_out is None else timed_out
            exc.run = run  # type: ignore[attr-defined]
            self.exception = exc
        except KeyboardInterrupt as exc:
            status = "stopped"  # Ctrl-C while the run computed (core/engine/_aio.py): it goes on up
            run.error = INTERRUPTED
            exc.run = run  # type: ignore[attr-defined]
            self.exception = exc
            raise
        except GeneratorExit:  # dropped while paused, the session was collected with its task
            status, run.error = "stopped", INTERRUPTED  # (its sources: `closed_with`)
            raise
        except BaseException as exc:
            status = "failed"
            run.error = f"{type(exc).__name__}: {exc}"
            exc.run = run  # type: ignore[attr-defined]
            self.exception = exc
            if not isinstance(exc, Exception):
                raise
        finally:
            await self._close(top, status)

    def _open(self) -> Position:
        """The run's top position, registered as the run starts."""
        run = self.result
        _current_run.set(run)
        remember(run)
        top = Position(self._control, Scope(history=run.history, turns=run.turns), state=run.state)
        self._top = top
        task = asyncio.current_task()
        if task is not None:
            self._control.tasks[top] = task
        if _observe.observer is not None:
            _observe.observer.run_started(run)
        return top

    async def _close(self, top: Position, status: Any) -> None:
        """End the run: close its tool sources, fill in how it ended, persist that, and only
        then wake whoever waits on it."""
        run = self.result
        if self._control.tool_sources is not None:
            await close_tool_sources(self._control)
        run.output = top.ctx.output
        if self._control.replay is not None:
            run.replay_diverged_at = self._control.replay.diverged_at
        run.status = status
        run.finished_at = datetime.now(UTC)
        if _observe.observer is not None:
            _observe.observer.run_finished(run, self.exception)
        try:
            if self._control.recorder is not None:
                # Persist the ending before anyone waiting on the run is woken.
                await self._control.recorder.run_finished(run)
        except Exception as exc:  # the ending was not stored: the caller must hear of it
            if self.exception is None:
                exc.run = run  # type: ignore[attr-defined]
                self.exception = exc
        finally:
            self._control.tasks.pop(top, None)  # the run's own task: no cycle through it
            self._finish(status)

    def _finish(self, status: Any, *, announce: bool = True) -> None:
        run = self.result
        run.status = status
        if run.finished_at is None:
            run.finished_at = datetime.now(UTC)
        self.done = True
        if announce and self._control.subscribers:
            self._control.emit(event("run_finished"))
        self._wake()
        self._release()

    def _release(self) -> None:
        """Drop the run's references back to this session (its hooks, its tasks), so that
        an ended run holds no reference cycle: it is freed as soon as it is dropped, not by
        the next full garbage collection."""
        control = self._control
        control.on_turn.clear()
        control.on_branch_turn = None
        control.checkpoint = None
        self._keeper.pause = None

    async def _settled(self) -> None:
        """Wait for a stopped run's task to wind down (it persists the run's ending)."""
        task = self.task
        if task is not None and not task.done() and task is not asyncio.current_task():
            await asyncio.wait([task])

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    def _mark_open_loops(self, reason: LoopStopReason) -> None:
        # A paused session waits at the top level or in the branch it steps through.
        in_order = self._control.in_order
        where = in_order[0] if in_order is not None else self._top
        if where is not None:
            for frame in where.loops:
                frame.node.stop_reason = reason


def _current_task() -> asyncio.Task[Any] | None:
    """The task running now, or `None` outside an event loop."""
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


def _time_limit(cancelled: asyncio.CancelledError) -> str | None:
    """The error of a run cancelled for taking too long: the cancel's message when it is a
    `"TimeoutError: ..."` (`task.cancel(msg)`), else `None`."""
    message = cancelled.args[0] if cancelled.args else None
    return message if isinstance(message, str) and message.startswith("TimeoutError:") else None
