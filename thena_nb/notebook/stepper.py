"""The Stepper: a widget that steps through one live `Session`, turn by turn.

Built from stock ipywidgets only (buttons, an `IntSlider`, `HTML`, `Textarea`, `Image`), so
there is no front-end code to build. Every control calls a public method (`step`,
`step_iteration`, `run`, `stop`, `show`, `back`, `forward`, `what_if`), and the state a late
view needs (position, status, turn count, breakpoint hit) lives in traits.

Work never blocks the kernel: a button schedules a task on the running event loop and returns;
the task is `stepper.task` (awaitable), and a click while it runs is ignored, so there is never
a second turn in flight.

This module holds the controls and what they do; how each part looks is `_stepper_views`. It
reads the run only through the public `Session`: `result`, `context`, `open_loops`, events.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import ipywidgets as widgets
from traitlets import Bool, Int, Unicode, link

import thena_nb
from thena_nb.core.events import Event
from thena_nb.core.run import Run
from thena_nb.core.session import OpenLoop, Session
from thena_nb.core.steps import LoopStep, callable_name, walk
from thena_nb.core.stopping import call_condition
from thena_nb.core.types import Turn, TurnInfo
from thena_nb.core.what_if import WhatIf
from thena_nb.notebook import _stepper_views as views

# `benchmarks/stepper_render.py` times the chart drawing under these names.

__all__ = ["FRAME_ROWS", "Stepper"]

FRAME_ROWS = 20
"""Rows of the turn frame shown: the turns up to and including the shown one."""
_REFRESH_S = 0.25
"""While a run is going, redraw the shown turn at most this often."""
_CHART_DELAY_S = 0.2

_Where = tuple[tuple[str, int], ...]
"""A loop iteration, told apart from every other: `(path, iteration)` of each open loop from
the outermost down to it (a nested loop starts over at iteration 1 in each outer iteration)."""


class Stepper(widgets.VBox):
    """Step through a workflow run turn by turn: step, run, stop, scrub and break.

    Open it with `wf.stepper(input)` or `%thena_step NAME INPUT`; `display(stepper)` shows
    it. It drives `session` (the only thing that advances the run) and records nothing of its
    own beyond what it shows.

    Breakpoints pause `run()` and `step_iteration()` after a turn: `break_on_error` (a failed
    tool call), `break_on_rescued` (a call found in the model's text), every function given
    to `break_when` (an `until`-style `fn(ctx)` or `fn(ctx, state)`), and the expression in
    the "break when" box (`break_expression`), a Python expression evaluated after every
    turn with `turn` (the `Turn`), `ctx` (the run's context, its `turn` being this turn's
    `TurnInfo`), `state` and thena_nb's public names in scope, e.g.
    `turn.info.tool_name == "search"` or `ctx.loop_tool_calls > 3`.

    The what-if box takes a stop condition written with thena_nb's names, e.g.
    `max_tool_calls(3)` or `until_text("done")`, and shows at which iteration each loop of
    the recorded run would have stopped under it; no model is called.

    Args:
        session: A session of the core executor, e.g. `wf.session(input)`.
        **kwargs: Passed to `ipywidgets.VBox`.

    Example:
        >>> from thena_nb import Agent, Workflow
        >>> from thena_nb.models import ScriptedModel
        >>> wf = Workflow("hi", [Agent("A", model=ScriptedModel(["hello"]))])
        >>> stepper = wf.stepper("go")
        >>> stepper.status, stepper.turn_count
        ('new', 0)
    """

    position = Int(-1).tag(sync=True)
    """Index of the turn shown; -1 before the first turn."""
    turn_count = Int(0).tag(sync=True)
    """Turns recorded so far."""
    status = Unicode("new").tag(sync=True)
    """`new`, `running`, `paused`, or the run's final status once it ended."""
    breakpoint_hit = Int(None, allow_none=True).tag(sync=True)
    """Index of the turn whose breakpoint paused the last `run()`/`step_iteration()`."""
    break_on_error = Bool(False).tag(sync=True)
    """Pause after a turn with a failed tool call."""
    break_on_rescued = Bool(False).tag(sync=True)
    """Pause after a turn whose tool calls were rescued from the model's text."""
    break_expression = Unicode("").tag(sync=True)
    """A Python expression; pause after a turn where it is truthy (see the class docs)."""

    def __init__(self, session: Session, **kwargs: Any) -> None:
        self.session = session
        self._loop: asyncio.AbstractEventLoop | None = _running_loop()
        self.task: asyncio.Future[Any] | None = None
        """The action in flight (or the last one); `await stepper.task` waits for it."""
        self.break_conditions: list[Callable[..., Any]] = []
        """Functions given to `break_when`."""
        self._loop_steps = _loop_steps(session)
        self._would_stop: dict[int, str] = {}
        self._limits: dict[int, tuple[int, float]] = {}
        self._break_reasons: dict[int, str] = {}
        self._tokens: list[int] = []
        self._last_loop: _Where | None = None
        self._frame_key: tuple[int, int] | None = None
        self._chart_key: Any = None
        self._compiled: tuple[str, Any] | None = None
        self.chart_delay = _CHART_DELAY_S
        """Seconds the Stepper waits after an action before it redraws the chart."""
        self.chart_task: asyncio.Task[None] | None = None
        """The pending or last chart redraw; `await stepper.chart_task` waits for it."""
        self._error = ""
        self._busy = False
        self._stop_requested = False
        self._last_draw = 0.0
        self._build()
        super().__init__(children=self._layout(), **kwargs)
        link((self, "break_on_error"), (self.break_error_box, "value"))
        link((self, "break_on_rescued"), (self.break_rescued_box, "value"))
        link((self, "break_expression"), (self.break_text, "value"))
        self.session.breakpoints.append(self._breakpoint)
        self._unsubscribe = self.session.subscribe(self._on_event)
        self._refresh(follow=True)

    # -- public control API -------------------------------------------------------------

    def step(self) -> asyncio.Future[Any]:
        """Run one turn (a parallel block runs as a unit); the task's result is the turn."""
        return self._start(self._step)

    def step_iteration(self) -> asyncio.Future[Any]:
        """Run turns to the end of the current loop iteration (or the loop's or run's end).

        A breakpoint pauses it early. Outside loops it runs one turn.
        """
        return self._start(self._step_iteration)

    def run(self) -> asyncio.Future[Any]:
        """Run to the end or to the next breakpoint; the task's result is the `Run`."""
        return self._start(self._run)

    def stop(self) -> asyncio.Future[Any] | None:
        """Stop the run: at once when paused; when running, a model call in flight is
        cancelled (its turn is not recorded) and tools in flight finish first.

        Returns:
            The task that finishes when the run has stopped, or `None` if it already has.
        """
        self.session.stop()
        if self.task is not None and not self.task.done():
            self._stop_requested = True
            return self.task
        drive = self.session.task
        if drive is not None and not drive.done():
            return self._start(self._settle)
        self._refresh(follow=True)
        return None

    def show(self, index: int) -> None:
        """Show recorded turn `index` (clamped to the recorded turns); nothing is re-run."""
        turns = self.session.result.turns
        if not turns:
            self._render_empty()
            return
        index = max(0, min(int(index), len(turns) - 1))
        self.position = index
        if self.slider.value != index:
            self.slider.value = index
        self._render_turn(index)

    def back(self) -> None:
        """Show the turn before the one shown."""
        self.show(self.position - 1)

    def forward(self) -> None:
        """Show the turn after the one shown."""
        self.show(self.position + 1)

    def break_when(self, condition: Callable[..., Any] | str) -> None:
        """Pause `run()` after any turn where `condition` holds.

        Args:
            condition: An `until`-style function, `fn(ctx)` or `fn(ctx, state)`, evaluated
                after every turn; or an expression, which goes in the "break when" box.
        """
        if isinstance(condition, str):
            self.break_expression = condition
        elif callable(condition):
            self.break_conditions.append(condition)
        else:
            raise TypeError(
                f"`break_when` takes a function `fn(ctx)` or an expression, got {condition!r}"
            )

    def what_if(self, until: Callable[..., Any] | str) -> dict[str, WhatIf]:
        """Where each loop of the recorded run would have stopped under another `until`.

        No model is called: the condition is evaluated on the recorded turns after each
        recorded iteration, as the executor would have.

        Args:
            until: A stop condition, or an expression naming thena_nb's stop helpers,
                e.g. `"max_tool_calls(3)"` or `"until_text('done') | until_answered"`.

        Returns:
            `run.what_if(until)`: `{loop_path: WhatIf(iteration, stop_reason)}`, with
            `WhatIf(None, None)` for a loop the condition would not have stopped within its
            recorded iterations. A loop that ran more than once (nested in another loop) is
            keyed `path#2`, `path#3`, ... after its first run.

        Raises:
            Exception: The expression does not compile or evaluate, or the condition raised;
                the widget shows it too.
        """
        self.what_if_text.value = until if isinstance(until, str) else callable_name(until)
        try:
            condition = self._condition(until) if isinstance(until, str) else until
            if not callable(condition):
                raise TypeError(f"{until!r} is not a stop condition: it is not callable")
            run = self.session.result
            answers = run.what_if(condition)
        except Exception as exc:
            self.what_if_html.value = views.error_html(f"what-if: {views.exception_text(exc)}")
            raise
        self.what_if_html.value = views.what_if_html(callable_name(condition), run.loops, answers)
        return answers

    def close(self) -> None:
        """Stop listening to the session and close the widget and its children."""
        self._unsubscribe()
        if self._breakpoint in self.session.breakpoints:
            self.session.breakpoints.remove(self._breakpoint)
        if self.chart_task is not None:
            self.chart_task.cancel()
        for child in self.children:
            _close_tree(child)
        super().close()

    def __repr__(self) -> str:
        return (
            f"Stepper({self.session.workflow.name!r}, {self.status}, "
            f"turns={self.turn_count}, position={self.position})"
        )

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        """The widget, plus a `text/html` snapshot of what it shows now: a saved notebook
        then reads well where widgets do not render (GitHub, nbviewer)."""
        data = super()._repr_mimebundle_(**kwargs)
        if data is not None:
            data["text/html"] = self.snapshot_html()
        return data

    def snapshot_html(self) -> str:
        """What the Stepper shows at this moment, as static HTML (no controls, no script)."""
        views_html = [
            self.header.value,
            self.position_html.value,
            self.error_html.value,
            self.turn_html.value,
            self.frame_html.value,
        ]
        chart = self.chart.value
        if chart and self.chart.layout.display != "none":
            encoded = base64.b64encode(bytes(chart)).decode("ascii")
            views_html.append(f'<img alt="failure chart" src="data:image/png;base64,{encoded}"/>')
        body = "".join(v for v in views_html if v)
        return f'<div class="thena-stepper-snapshot">{body}</div>'

    # -- actions --------------------------------------------------------------------------

    def _on_loop(self, fn: Callable[[], Any]) -> None:
        """Call `fn` on the Stepper's event loop: now if this is it, else as soon as it can.

        A front end may send widget messages on a kernel subshell, which has its own thread
        and event loop; the session and the widget state belong to one loop only.
        """
        loop = self._loop
        if loop is None or loop is _running_loop() or loop.is_closed() or not loop.is_running():
            fn()
        else:
            loop.call_soon_threadsafe(fn)

    def _start(self, action: Callable[[], Coroutine[Any, Any, Any]]) -> asyncio.Future[Any]:
        running = _running_loop()
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
            self._set_busy(False)
            self._refresh(follow=True)

    async def _step(self) -> Turn | None:
        return await self.session.step()

    async def _step_iteration(self) -> Turn | None:
        session = self.session
        turn = await session.step()
        if turn is None:
            return None
        where = self._last_loop
        while where is not None and not session.done and not self._stop_requested:
            if self._break_reasons.get(turn.index):
                break
            # The iteration is over once its loop has moved on or is no longer running.
            if _where(session.open_loops[: len(where)]) != where:
                break
            following = await session.step()
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

    # -- the session's side -------------------------------------------------------------

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
            self.live_label.value = views.answering_html(event.agent)
        elif kind == "text_delta":
            self.live_text.value += event.text or ""
        elif kind == "tool_started" and event.tool_call is not None:
            self.live_label.value = views.calling_html(event.agent, event.tool_call.name)
        elif kind == "turn_finished" and event.turn is not None:
            self._note_turn(event.turn)
            now = time.monotonic()
            if now - self._last_draw >= _REFRESH_S:
                self._last_draw = now
                self._sync_turns()
                self.show(len(self.session.result.turns) - 1)

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
        self._last_loop = _where(loops[: depth + 1])
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

    # -- the controls -------------------------------------------------------------------

    def _build(self) -> None:
        button = widgets.Button
        self.header = widgets.HTML()
        self.step_button = button(description="Step", tooltip="Run one turn", icon="step-forward")
        self.iteration_button = button(
            description="Step iteration", tooltip="Run to the end of this loop iteration"
        )
        self.run_button = button(
            description="Run", tooltip="Run to the end or the next breakpoint", icon="play"
        )
        self.stop_button = button(description="Stop", tooltip="Stop the run", icon="stop")
        self.back_button = button(description="", tooltip="Previous turn", icon="chevron-left")
        self.forward_button = button(description="", tooltip="Next turn", icon="chevron-right")
        for b in (self.back_button, self.forward_button):
            b.layout.width = "36px"
        self.slider = widgets.IntSlider(
            value=0, min=0, max=0, description="turn", continuous_update=True, disabled=True
        )
        self.position_html = widgets.HTML()
        self.break_error_box = widgets.Checkbox(
            description="on failed tool call", indent=False, layout={"width": "auto"}
        )
        self.break_rescued_box = widgets.Checkbox(
            description="on rescued call", indent=False, layout={"width": "auto"}
        )
        self.break_text = widgets.Text(
            placeholder="break when… e.g. turn.info.tool_name == 'search'",
            layout={"width": "360px"},
        )
        self.live_label = widgets.HTML(views.LIVE_LABEL)
        self.live_text = widgets.Textarea(
            disabled=True, rows=3, layout={"width": "100%"}, placeholder="(streamed text)"
        )
        self.turn_html = widgets.HTML()
        self.error_html = widgets.HTML()
        self.frame_html = widgets.HTML(layout={"overflow": "auto", "max_width": "100%"})
        self.chart = widgets.Image(format="png", layout={"max_width": "640px", "display": "none"})
        self.what_if_text = widgets.Text(
            placeholder="what if until = … e.g. max_tool_calls(3)", layout={"width": "360px"}
        )
        self.what_if_button = button(description="What if", tooltip="Evaluate on recorded turns")
        self.what_if_html = widgets.HTML()
        handlers: list[tuple[widgets.Button, Callable[[], Any]]] = [
            (self.step_button, self.step),
            (self.iteration_button, self.step_iteration),
            (self.run_button, self.run),
            (self.stop_button, self.stop),
            (self.back_button, self.back),
            (self.forward_button, self.forward),
            (self.what_if_button, self._what_if_clicked),
        ]
        for b, method in handlers:
            b.on_click(lambda _, method=method: self._on_loop(method))
        self.slider.observe(lambda change: self._on_loop(lambda: self._slid(change)), "value")

    def _layout(self) -> list[widgets.Widget]:
        controls = widgets.HBox(
            [self.step_button, self.iteration_button, self.run_button, self.stop_button]
        )
        scrub = widgets.HBox([self.back_button, self.slider, self.forward_button])
        breaks = widgets.HBox(
            [
                widgets.HTML("<b>break</b>&nbsp;"),
                self.break_error_box,
                self.break_rescued_box,
                self.break_text,
            ]
        )
        what_if = widgets.HBox([self.what_if_text, self.what_if_button])
        tables = widgets.HBox([self.frame_html, self.chart], layout={"flex_flow": "row wrap"})
        rows: list[widgets.Widget] = [
            self.header,
            controls,
            scrub,
            self.position_html,
            self.error_html,
            self.turn_html,
            self.live_label,
            self.live_text,
            breaks,
            tables,
            what_if,
            self.what_if_html,
        ]
        return rows

    def _slid(self, change: dict[str, Any]) -> None:
        if change["new"] != self.position and self.session.result.turns:
            self.show(change["new"])

    def _what_if_clicked(self) -> None:
        text = self.what_if_text.value.strip()
        if text:
            # `what_if` shows any error in the widget; a click has nowhere else to raise to.
            with contextlib.suppress(Exception):
                self.what_if(text)

    def _set_busy(self, busy: bool) -> None:
        self._busy = busy
        if busy:
            self.status = "running"
        self._render_controls()

    def _render_controls(self) -> None:
        done = self.session.done
        for b in (self.step_button, self.iteration_button, self.run_button):
            b.disabled = self._busy or done
        self.stop_button.disabled = done
        n = len(self.session.result.turns)
        self.back_button.disabled = self.position <= 0
        self.forward_button.disabled = self.position >= n - 1
        self.slider.disabled = n == 0

    # -- the views ----------------------------------------------------------------------

    def _refresh(self, *, follow: bool) -> None:
        """Bring every view up to date with the session (after an action, or at start)."""
        self._sync_turns()
        session = self.session
        if not self._busy:
            self.status = (
                session.result.status
                if session.done
                else ("paused" if session.task is not None else "new")
            )
        n = len(session.result.turns)
        if follow and n:
            self.show(n - 1)
        elif n:
            self._render_turn(self.position)
        else:
            self._render_empty()
        hit = self.breakpoint_hit
        reason = self._break_reasons.get(hit, "") if hit is not None else ""
        self.header.value = views.header_html(
            session.workflow.name, self.status, self.turn_count, hit=hit, reason=reason
        )
        run = session.result
        failed = run.error if run.status == "failed" and run.error else ""
        self.error_html.value = views.error_html(self._error or failed)
        if not self._busy:
            self._schedule_chart()

    def _sync_turns(self) -> None:
        turns = self.session.result.turns
        n = len(turns)
        tokens = self._tokens
        total = tokens[-1] if tokens else 0
        for turn in turns[len(tokens) : n]:
            total += turn.input_tokens + turn.output_tokens
            tokens.append(total)
        if self.slider.max != max(0, n - 1):
            self.slider.max = max(0, n - 1)
        self.turn_count = n

    def _render_empty(self) -> None:
        self.position = -1
        self.position_html.value = views.EMPTY_POSITION
        self.turn_html.value = ""
        self.frame_html.value = ""
        self._frame_key = None
        self._render_controls()

    def _render_turn(self, index: int) -> None:
        """Show turn `index`: its card, the position line and the frame window."""
        turns = self.session.result.turns
        turn = turns[index]
        self.turn_html.value = views.turn_card_html(
            turn,
            would_stop=self._would_stop.get(index),
            break_reason=self._break_reasons.get(index),
        )
        tokens = self._tokens[index] if index < len(self._tokens) else 0
        self.position_html.value = views.position_html(
            turn, len(turns), limits=self._limits.get(index), tokens=tokens
        )
        window = views.frame_window(index, FRAME_ROWS)
        if window != self._frame_key:
            self.frame_html.value = views.frame_table_html(turns, *window, rows=FRAME_ROWS)
            self._frame_key = window
        self._render_controls()

    def _schedule_chart(self) -> None:
        """Redraw the failure chart soon, in a worker thread, unless another action starts.

        Drawing takes a few hundred milliseconds on a long run, so it stays off the path of
        a step: each action ends without it, and a quick next click cancels a pending draw.
        """
        loop = _running_loop()
        if loop is None:
            return
        if self.chart_task is not None and not self.chart_task.done():
            self.chart_task.cancel()
        self.chart_task = loop.create_task(self._draw_chart())

    async def _draw_chart(self) -> None:
        if self.chart_delay > 0:
            await asyncio.sleep(self.chart_delay)
        run = self.session.result
        loops = run.loops[-views.CHART_LOOPS :]
        key = (len(run.turns), tuple((n.path, n.iterations, n.stop_reason) for n in loops))
        if key == self._chart_key:
            return
        if not loops:  # nothing to draw until a loop has started
            self.chart.layout.display = "none"
            self._chart_key = key
            return
        turns = list(run.turns)
        # The run goes on while the worker draws: it gets copies that will not change.
        frozen = [views.frozen_loop(node, len(turns)) for node in loops]
        self.chart.value = await asyncio.to_thread(views.chart_png, turns, frozen)
        self.chart.layout.display = None
        self._chart_key = key


# -- helpers ------------------------------------------------------------------------------


class _TurnView:
    """The live context with `turn` pinned to one turn (a parallel branch's turn is told
    to listeners before the block sets the context's `turn`)."""

    __slots__ = ("_ctx", "turn")

    def __init__(self, ctx: Any, info: TurnInfo) -> None:
        self._ctx = ctx
        self.turn = info

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


def _loop_steps(session: Session) -> dict[str, LoopStep]:
    """The workflow's loops by step path, where `OpenLoop.path` finds its `until`."""
    wf = session.workflow
    return {path: step for path, step in walk(wf.steps, wf.name) if isinstance(step, LoopStep)}


def _enclosing(loops: Sequence[OpenLoop], step_path: str) -> int | None:
    """The depth in `loops` of the innermost one that `step_path` runs in, if any."""
    for depth in range(len(loops) - 1, -1, -1):
        if step_path.startswith(loops[depth].path + "/"):
            return depth
    return None


def _where(loops: Sequence[OpenLoop]) -> _Where:
    return tuple((loop.path, loop.iteration) for loop in loops)


def _would_stop(until: Callable[..., Any], view: Any) -> str:
    try:
        verdict: bool | BaseException = bool(
            call_condition(until, view, getattr(view, "state", None))
        )
    except Exception as exc:
        verdict = exc
    return views.would_stop_html(callable_name(until), verdict)


def _close_tree(widget: widgets.Widget) -> None:
    for child in getattr(widget, "children", ()):
        _close_tree(child)
    widget.close()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


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
