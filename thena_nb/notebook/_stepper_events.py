"""The Stepper's side of the session: what its events change and what each turn leaves noted.

While a turn runs, the session's events (`turn_started`, `text_delta`, `tool_started`,
`turn_finished`, `loop_stopped`, `run_finished`) move the live label (who is answering, which
tool runs), the streamed text and the header. When a turn ends, `_Events` notes what later
views of it need as of that moment (the limits of the loop it ran in, its `until` verdict,
the running token total) and checks the breakpoints (`break_on_error`, `break_on_rescued`,
`break_when` functions, the "break when" expression); the session asks `_breakpoint` whether
to pause after it. A mixin of `Stepper`, which combines it with the others; the attributes it
declares are the widget's.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Sequence
from html import unescape
from typing import TYPE_CHECKING, Any

import thena_nb
from thena_nb.core.engine.session import OpenLoop, Session
from thena_nb.core.parts.steps import LoopStep, callable_name, walk
from thena_nb.core.parts.stopping import call_condition
from thena_nb.core.records.events import Event
from thena_nb.core.records.types import Turn, TurnInfo
from thena_nb.notebook import _stepper_views as views
from thena_nb.notebook._widget_parts import StepperParts

if TYPE_CHECKING:
    from thena_nb.notebook._stepper_run import RecordedSession

__all__ = ["Where", "iteration_of"]

_REFRESH_S = 0.25
"""While a run is going, redraw the shown turn at most this often."""
_LIVE_CHART_S = 1.0
"""While a run is going, redraw the chart at most this often."""

Where = tuple[tuple[str, int], ...]
"""A loop iteration, told apart from every other: `(path, iteration)` of each open loop from
the outermost down to it (a nested loop starts over at iteration 1 in each outer iteration)."""


class _Events(StepperParts):
    """The session's events and the notes of each turn (a mixin of `Stepper`)."""

    session: Session | RecordedSession
    status: str
    live: str
    break_on_error: bool
    break_on_rescued: bool
    break_expression: str
    break_conditions: list[Callable[..., Any]]
    _busy: bool
    _error: str
    _compiled: tuple[str, Any] | None
    _last_draw: float
    _last_chart: float

    if TYPE_CHECKING:  # the Stepper's, and the other mixins'

        def show(self, index: int) -> None: ...
        def _all_turns(self) -> list[Turn]: ...
        def _sync_turns(self) -> None: ...
        def _render_header(self) -> None: ...
        def _schedule_chart(self) -> None: ...

    def _reset_caches(self) -> None:
        """Forget what was noted of the session's turns (a new session is followed)."""
        self._loop_steps = _loop_steps(self.session)
        self._would_stop: dict[int, str] = {}
        # A live run's limits are noted turn by turn; a recorded one's come from its report.
        recorded = not isinstance(self.session, Session)
        self._limits: dict[int, tuple[int, float]] = (
            views.loop_limits(self.session.result.loops) if recorded else {}
        )
        self._break_reasons: dict[int, str] = {}
        self._tokens: list[int] = []
        self._branch_turns: list[Turn] = []
        self._what_if_marks: list[int | None] | None = None
        self._last_loop: Where | None = None
        self._frame_key: tuple[int, int, int, int] | None = None
        self._chart_key: Any = None
        self._live_agent: tuple[str, int | None] | None = None

    def _on_event(self, event: Event) -> None:
        try:
            self._handle(event)
        except Exception as exc:  # pragma: no cover - a display bug must not fail the run
            self._error = views.exception_text(exc)

    def _handle(self, event: Event) -> None:
        kind = event.kind
        if kind == "turn_started":
            if self.live_text.value:
                self.live_text.value = ""
            branch = _branch_of(event.path)
            self._live_agent = (event.agent or "", branch)
            self._set_live(views.answering_html(event.agent, branch))
        elif kind == "text_delta":
            self.live_text.value += event.text or ""
        elif kind == "tool_started" and event.tool_call is not None:
            self._set_live(views.calling_html(event.agent, event.tool_call.name))
        elif kind == "turn_finished" and event.turn is not None:
            self._turn_finished(event.turn)
        elif kind in ("loop_stopped", "run_finished"):
            self._render_header()

    def _set_live(self, html: str) -> None:
        self.live_label.value = html
        self.live = _plain(html)
        if self.status not in ("running", "stopping", "pausing"):
            self.status = "running"
        self._render_header()

    def _turn_finished(self, turn: Turn) -> None:
        self._note_turn(turn)
        self._branch_turns = [t for t in self._branch_turns if t.index > turn.index]
        self.live = ""
        self._live_agent = None
        self._sync_turns()
        now = time.monotonic()
        if now - self._last_draw >= _REFRESH_S:
            self._last_draw = now
            self.show(len(self._all_turns()) - 1)
        if self._busy and now - self._last_chart >= _LIVE_CHART_S:
            self._last_chart = now  # the chart keeps up with a long run, now and then
            self._schedule_chart()
        self._render_header()

    def _note_turn(self, turn: Turn) -> None:
        """Record, as of the moment the turn ended, what later views of it need."""
        ctx = self.session.context
        view = _TurnView(ctx, turn.info) if ctx is not None else None
        self._last_loop = None
        if turn.iteration is not None:
            self._note_loop(turn, view)
        reason = self._check_breakpoints(turn, view)
        if reason:
            self._break_reasons[turn.index] = reason

    def _note_loop(self, turn: Turn, view: Any) -> None:
        """The limits, the iteration and the `until` verdict of the loop the turn ran in."""
        loops = self.session.open_loops
        depth = _enclosing(loops, turn.step_path)
        if depth is None:
            return
        loop = loops[depth]
        self._limits[turn.index] = (loop.max_iterations, loop.max_fails)
        self._last_loop = iteration_of(loops[: depth + 1])
        step = self._loop_steps.get(loop.path)
        if step is not None:
            self._would_stop[turn.index] = _would_stop(step.until, view)

    def _breakpoint(self, turn: Turn) -> bool:
        return bool(self._break_reasons.get(turn.index))

    def _check_breakpoints(self, turn: Turn, view: Any) -> str | None:
        if self.break_on_error and turn.info.tool_error:
            failed = [c.name for c in turn.tool_calls if c.ok is False]
            return f"failed tool call ({', '.join(failed)})"
        if self.break_on_rescued and any(c.source == "rescued" for c in turn.tool_calls):
            return "rescued tool call"
        state = getattr(view, "state", None)
        for fn in self.break_conditions:
            try:
                if call_condition(fn, view, state):
                    return f"condition {callable_name(fn)}"
            except Exception as exc:
                return f"condition {callable_name(fn)} raised {views.exception_text(exc)}"
        return self._check_expression(turn, view, state)

    def _check_expression(self, turn: Turn, view: Any, state: Any) -> str | None:
        expression = self.break_expression.strip()
        if not expression:
            return None
        try:
            if self._compiled is None or self._compiled[0] != expression:
                self._compiled = (expression, compile(expression, "<break when>", "eval"))
            scope = {**_names(), "turn": turn, "ctx": view, "state": state}
            if eval(self._compiled[1], scope):
                return f"condition {expression}"
        except Exception as exc:
            return f"condition {expression} raised {views.exception_text(exc)}"
        return None

    def _condition(self, expression: str) -> Any:
        return eval(compile(expression, "<what-if>", "eval"), _names())


def _branch_of(path: str | None) -> int | None:
    """The branch a step path runs in: the number after the innermost `parallel` step."""
    parts = (path or "").split("/")
    branch = None
    for before, part in itertools.pairwise(parts):
        if before.endswith("parallel"):
            head = part.split(".", 1)[0]
            branch = int(head) if head.isdigit() else branch
    return branch


def _plain(html: str) -> str:
    """The text of a small HTML label (`<b>A</b> is answering…` → `A is answering…`)."""
    return unescape(re.sub(r"<[^>]+>", "", html))


class _TurnView:
    """The live context with `turn` pinned to one turn (a parallel branch's turn is told
    to listeners before the block sets the context's `turn`)."""

    __slots__ = ("_ctx", "turn")

    def __init__(self, ctx: Any, info: TurnInfo) -> None:
        self._ctx = ctx
        self.turn = info

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


def _loop_steps(session: Session | RecordedSession) -> dict[str, LoopStep]:
    """The workflow's loops by step path, where `OpenLoop.path` finds its `until`."""
    wf = session.workflow
    if wf is None:
        return {}
    return {path: step for path, step in walk(wf.steps, wf.name) if isinstance(step, LoopStep)}


def _enclosing(loops: Sequence[OpenLoop], step_path: str) -> int | None:
    """The depth in `loops` of the innermost one that `step_path` runs in, if any."""
    for depth in range(len(loops) - 1, -1, -1):
        if step_path.startswith(loops[depth].path + "/"):
            return depth
    return None


def iteration_of(loops: Sequence[OpenLoop]) -> Where:
    """The iteration that `loops`, from the outermost down, are at: a `Where`."""
    return tuple((loop.path, loop.iteration) for loop in loops)


def _would_stop(until: Callable[..., Any], view: Any) -> str:
    try:
        verdict: bool | BaseException = bool(
            call_condition(until, view, getattr(view, "state", None))
        )
    except Exception as exc:
        verdict = exc
    return views.would_stop_html(callable_name(until), verdict)


def _names() -> dict[str, Any]:
    """thena_nb's public names, under the user's own names when running in IPython."""
    names: dict[str, Any] = {}
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None:
            names.update(shell.user_ns)
    except ImportError:  # pragma: no cover - IPython is a dependency of this layer
        pass
    names.update({name: getattr(thena_nb, name) for name in thena_nb.__all__})
    return names
