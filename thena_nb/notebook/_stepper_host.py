"""The Stepper's engine room: it drives the session, one action at a time, on one event loop.

A control never blocks the kernel: `_start` schedules the action (a step, a run, the steps
of a fork up to its edited turn, the end of a stop) as a task on the Stepper's event loop and
returns it (`stepper.task`); a click while one runs is ignored, so there is never a second
turn in flight. A command from another thread (a kernel subshell has its own loop) hops to
the Stepper's loop first (`_on_loop`). `_Host` also attaches the Stepper to a session (its
breakpoint hook, its events, the "every call" gate), follows a fork or a parent, and keeps
the busy state (`_set_busy`). A mixin of `Stepper`, which combines it with the others; the
attributes it declares are the widget's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from thena_nb.core.engine.session import Session
from thena_nb.core.records.events import Event
from thena_nb.core.records.types import ToolCall, Turn
from thena_nb.core.runs.run import Run
from thena_nb.notebook import _stepper_views as views
from thena_nb.notebook._stepper_events import Where, iteration_of
from thena_nb.notebook._widget_parts import StepperParts

if TYPE_CHECKING:
    from thena_nb.notebook._stepper_gates import GateCard
    from thena_nb.notebook._stepper_run import RecordedSession

__all__ = ["every_call", "running_loop"]


def every_call(call: ToolCall) -> bool:
    """The gate predicate of "pause before every tool call"."""
    return True


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, if any."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class _Host(StepperParts):
    """Drive the session on the Stepper's event loop (a mixin of `Stepper`)."""

    session: Session | RecordedSession
    task: asyncio.Future[Any] | None
    gate_cards: dict[str, GateCard]
    status: str
    mode: str
    run_id: str
    live: str
    position: int
    breakpoint_hit: int | None
    gate_every_call: bool
    _loop: asyncio.AbstractEventLoop | None
    _busy: bool
    _stop_requested: bool
    _error: str
    _live_agent: tuple[str, int | None] | None
    _last_loop: Where | None
    _branch_turns: list[Turn]
    _break_reasons: dict[int, str]

    if TYPE_CHECKING:  # the other mixins'

        def _on_event(self, event: Event) -> None: ...
        def _breakpoint(self, turn: Turn) -> bool: ...
        def _reset_caches(self) -> None: ...
        def _note_turn(self, turn: Turn) -> None: ...
        def _refresh(self, *, follow: bool) -> None: ...
        def _render_mode(self) -> None: ...
        def _render_controls(self) -> None: ...
        def _empty_position(self) -> str: ...

    def _attach(self, session: Session | RecordedSession) -> None:
        """Listen to `session` and drive it: its breakpoint hook, its events, its gates."""
        self.session = session
        self.mode = "live" if isinstance(session, Session) else "view"
        session.breakpoints.append(self._breakpoint)
        self._unsubscribe = session.subscribe(self._on_event)
        if self.gate_every_call and every_call not in session.gates:
            session.gates.append(every_call)
        self.run_id = session.result.run_id
        self._render_mode()

    def _detach(self) -> None:
        """Stop listening to the session (it is closed, or another one is followed)."""
        self._unsubscribe()
        if self._breakpoint in self.session.breakpoints:
            self.session.breakpoints.remove(self._breakpoint)

    def _on_loop(self, fn: Callable[[], Any]) -> None:
        """Call `fn` on the Stepper's event loop: now if this is it, else as soon as it can.

        A front end may send widget messages on a kernel subshell, which has its own thread
        and event loop; the session and the widget state belong to one loop only.
        """
        loop = self._loop
        if loop is None or loop is running_loop() or loop.is_closed() or not loop.is_running():
            fn()
        else:
            loop.call_soon_threadsafe(fn)

    def _start(self, action: Callable[[], Coroutine[Any, Any, Any]]) -> asyncio.Future[Any]:
        running = running_loop()
        if self._loop is None or self._loop.is_closed():
            self._loop = running or asyncio.get_event_loop_policy().get_event_loop()
        loop = self._loop
        if running is not None and running is not loop and loop.is_running():
            # Called from another thread's loop: start it on ours, and hand back a future
            # of this loop that finishes with it.
            started = asyncio.run_coroutine_threadsafe(self._started(action), loop)
            return asyncio.wrap_future(started, loop=running)
        if self.task is not None and not self.task.done():
            return self.task  # never a second turn in flight: the click is ignored
        self._stop_requested = False
        self._error = ""
        self.breakpoint_hit = None
        self._set_busy(True)
        self.task = loop.create_task(self._act(action))
        return self.task

    async def _started(self, action: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        return await self._start(action)

    async def _act(self, action: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        try:
            return await action()
        except Exception as exc:
            # A model or tool error ends the run; it is shown and the Stepper stays usable.
            self._error = views.exception_text(exc)
            return None
        finally:
            self.live_label.value = views.LIVE_LABEL
            self.live = ""
            self._live_agent = None
            self._set_busy(False)
            self._refresh(follow=True)

    async def _step(self) -> Turn | None:
        turn = await self.session.step()
        self._note_branch(turn)
        return turn

    async def _step_to(self, index: int) -> Turn | None:
        """Step a fork up to and including turn `index` (its replayed turns, then the edit)."""
        turn: Turn | None = None
        while not self.session.done and not self._stop_requested:
            turn = await self._step()
            if turn is None or turn.index >= index:
                break
        return turn

    async def _step_iteration(self) -> Turn | None:
        session = self.session
        turn = await self._step()
        if turn is None:
            return None
        where = self._last_loop
        while where is not None and not session.done and not self._stop_requested:
            if self._break_reasons.get(turn.index) or session.pending:
                break
            # The iteration is over once its loop has moved on or is no longer running.
            if iteration_of(session.open_loops[: len(where)]) != where:
                break
            following = await self._step()
            if following is None:
                break
            turn = following
        if self._break_reasons.get(turn.index):
            self.breakpoint_hit = turn.index
        return turn

    async def _run(self) -> Run:
        run = await self.session.run()
        hit = self.session.breakpoint_hit
        if hit is not None and not self.session.done:
            self.breakpoint_hit = hit.index
        return run

    async def _settle(self) -> None:
        drive = self.session.task
        if drive is not None:
            await asyncio.wait([drive])

    def _note_branch(self, turn: Turn | None) -> None:
        """A stepped branch turn of a `parallel` block: shown until the block merges."""
        if turn is None or turn.branch is None:
            return
        if turn.index >= len(self.session.result.turns):
            self._branch_turns.append(turn)
            self._note_turn(turn)

    def _follow(self, session: Session | RecordedSession) -> None:
        """Show and drive `session` from now on (a fork, or a parent again)."""
        self._detach()
        self.session = session
        self._reset_caches()
        self._attach(session)
        self.gate_cards = {}
        self._refresh(follow=True)

    def _set_busy(self, busy: bool) -> None:
        """An action starts (`True`) or has ended: the live box, the status, the controls."""
        self._busy = busy
        self.live_box.hidden = not busy
        if busy:
            self.status = "running"
            if self.position < 0:
                self.position_html.value = self._empty_position()
        self._render_controls()
