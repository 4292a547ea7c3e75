"""The Stepper: a debugger for one live `Session`, turn by turn.

One `anywidget.AnyWidget` with a small ES module shipped in the package (`static/stepper.js`,
no build step, nothing fetched at run time), so it renders wherever anywidget does:
JupyterLab, Jupyter Notebook, VS Code, Colab and marimo. Python keeps the session, the gates
and every view; the front end lays out the parts (`_widget_parts`: HTML sections Python made,
buttons, checkboxes, text boxes, the turn slider, the inspector's tabs, the gate cards) and
sends back commands (`model.send`), which `_command` hands to the part they name: a button's
`click()`, a box's `value`. Only what is shown is sent, and only when it changed: each HTML
section is a trait of its own (`s_<part>`), the small state of every part is `parts`, the
gate cards `gates`. Every control calls a public method
(`step`, `step_iteration`, `run`, `pause`, `continue_run`, `stop`, `show`, `back`,
`forward`, `what_if`, `decide`, `edit_turn`, `back_to_parent`), and the state a late view
needs (position, status, turn count, breakpoint hit, pending calls) lives in traits.

Work never blocks the kernel: a button schedules a task on the running event loop and returns;
the task is `stepper.task` (awaitable), and a click while it runs is ignored, so there is never
a second turn in flight.

This module holds the controls and what they do; how each part looks is `_stepper_views`,
`_transcript` (the conversation, the inspector, the turn table) and `_svg_chart`; the gate
cards and the edit-and-continue fork are `_stepper_gates`. It reads the run through the
public `Session`: `result`, `context`, `open_loops`, `pending`, `decide`, events.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from html import unescape
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anywidget
from traitlets import Bool, Dict, Int, List, Unicode, link

import thena_nb
from thena_nb.core.engine.session import OpenLoop, Session
from thena_nb.core.parts.steps import LoopStep, callable_name, walk
from thena_nb.core.parts.stopping import call_condition
from thena_nb.core.records import _html
from thena_nb.core.records.decisions import Decision
from thena_nb.core.records.events import Event
from thena_nb.core.records.model import Reply
from thena_nb.core.records.types import ToolCall, Turn, TurnInfo
from thena_nb.core.runs.run import Run
from thena_nb.core.runs.what_if import WhatIf
from thena_nb.notebook import _stepper_views as views
from thena_nb.notebook import _svg_chart, _theme, _transcript
from thena_nb.notebook._stepper_gates import (
    GateCard,
    fork_session,
    live_fork_session,
    tool_schema,
)
from thena_nb.notebook._widget_parts import Button, Check, Choice, Html, Part, Slider, Tabs, Text

if TYPE_CHECKING:
    from thena_nb.notebook._stepper_run import RunView

# `benchmarks/stepper_render.py` times the chart drawing under these names.

__all__ = ["EDIT_TAB", "FRAME_ROWS", "Stepper"]

EDIT_TAB = "Edit"
"""The inspector's last tab: edit the shown turn's reply or a tool result, then fork."""
_EDIT_HELP = (
    "<div>Edit the reply or a tool result of the shown turn, then fork the run from it: "
    "the Stepper follows the fork (a button leads back to this run).</div>"
)
FRAME_ROWS = 20
"""Rows of the turn frame: every turn when they fit, else this many around the shown one."""
_REFRESH_S = 0.25
"""While a run is going, redraw the shown turn at most this often."""
_CHART_DELAY_S = 0.2
_LIVE_CHART_S = 1.0
"""While a run is going, redraw the chart at most this often."""
_STOPPED_LOOPS = 4
"""Stopped loops the header names, the latest ones."""

_STATIC = Path(__file__).parent / "static"
_SECTIONS = (
    "header",
    "view_html",
    "position_html",
    "error_html",
    "live_label",
    "live_text",
    "transcript_html",
    "turn_html",
    "saw_html",
    "reasoning_html",
    "tools_html",
    "edit_help",
    "edit_text",
    "edit_note",
    "edit_error",
    "frame_html",
    "chart",
    "what_if_html",
    "fork_html",
    "break_error_html",
)
"""The parts whose text is sent as a trait of its own (`s_<part>`): a change to one sends
that one only."""
_FIXED = ("kind", "description", "icon", "placeholder", "rows", "submit", "titles", "button_style")
"""The fields of a part's state that seldom change: sent apart from the rest (`parts_fixed`)."""

_Where = tuple[tuple[str, int], ...]
"""A loop iteration, told apart from every other: `(path, iteration)` of each open loop from
the outermost down to it (a nested loop starts over at iteration 1 in each outer iteration)."""


def _gate_every_call(call: ToolCall) -> bool:
    """The gate predicate of "pause before every tool call"."""
    return True


class Stepper(anywidget.AnyWidget):
    """Step through a workflow run turn by turn: step, run, pause, stop, gate, edit, break.

    Open it with `wf.stepper(input)` or `%thena_step NAME INPUT`; `display(stepper)` shows
    it. It drives `session` (the only thing that advances the run) and records nothing of its
    own beyond what it shows. `thena_nb.stepper(run)` (or `run.stepper()`) opens it on any
    recorded run in view mode (`mode == "view"`): the same views, no live controls, and
    "Fork from here" (`fork_here`) to go on live from the shown turn.

    The view: a header (the input, the status, who is answering, each open loop against its
    limits, stop reasons), the controls, one card per tool call held at a gate, the
    conversation beside an inspector of the shown turn (Reply, What the model saw,
    Reasoning, Tools), the turn table and the failure chart.

    Breakpoints pause `run()` and `step_iteration()` after a turn: `break_on_error` (a failed
    tool call), `break_on_rescued` (a call found in the model's text), every function given
    to `break_when` (an `until`-style `fn(ctx)` or `fn(ctx, state)`), and the expression in
    the "break when" box (`break_expression`, compiled as it is typed: `break_error` says
    what is wrong at once), a Python expression evaluated after every turn with `turn` (the
    `Turn`), `ctx` (the run's context, its `turn` being this turn's `TurnInfo`), `state` and
    thena_nb's public names in scope, e.g. `turn.info.tool_name == "search"`.

    The what-if box (Enter runs it) takes a stop condition written with thena_nb's names,
    e.g. `max_tool_calls(3)`, and shows, in words and on the chart, at which iteration each
    loop of the recorded run would have stopped under it; no model is called.

    Args:
        session: A session of the core executor, e.g. `wf.session(input)`; or a recorded
            run's `RunView` (what `thena_nb.stepper(run)` passes) for view mode.
        **kwargs: Passed to `anywidget.AnyWidget`.

    Example:
        >>> from thena_nb import Agent, Workflow
        >>> from thena_nb.models import ScriptedModel
        >>> wf = Workflow("hi", [Agent("A", model=ScriptedModel(["hello"]))])
        >>> stepper = wf.stepper("go")
        >>> stepper.status, stepper.turn_count
        ('new', 0)
    """

    _esm = (_STATIC / "stepper.js").read_text(encoding="utf-8")
    _css = _theme.widget_css() + (_STATIC / "stepper.css").read_text(encoding="utf-8")

    parts = Dict().tag(sync=True)
    """The state of every part that changes (`hidden`, `disabled`, `value`, ...) but its
    text (`s_<part>`), false and empty fields left out: `{name: {field: value}}`."""
    parts_fixed = Dict().tag(sync=True)
    """What each part is, which seldom changes: `{name: {kind, description, ...}}`."""
    gates: List[Any] = List().tag(sync=True)
    """The gate cards shown: one dict per call held at a gate (`GateCard.state()`)."""
    s_header = Unicode("").tag(sync=True)
    s_view_html = Unicode("").tag(sync=True)
    s_position_html = Unicode("").tag(sync=True)
    s_error_html = Unicode("").tag(sync=True)
    s_live_label = Unicode("").tag(sync=True)
    s_live_text = Unicode("").tag(sync=True)
    s_transcript_html = Unicode("").tag(sync=True)
    s_turn_html = Unicode("").tag(sync=True)
    s_saw_html = Unicode("").tag(sync=True)
    s_reasoning_html = Unicode("").tag(sync=True)
    s_tools_html = Unicode("").tag(sync=True)
    s_edit_help = Unicode("").tag(sync=True)
    s_edit_text = Unicode("").tag(sync=True)
    s_edit_note = Unicode("").tag(sync=True)
    s_edit_error = Unicode("").tag(sync=True)
    s_frame_html = Unicode("").tag(sync=True)
    s_chart = Unicode("").tag(sync=True)
    s_what_if_html = Unicode("").tag(sync=True)
    s_fork_html = Unicode("").tag(sync=True)
    s_break_error_html = Unicode("").tag(sync=True)

    position = Int(-1).tag(sync=True)
    """Index of the turn shown; -1 before the first turn."""
    turn_count = Int(0).tag(sync=True)
    """Turns recorded so far."""
    status = Unicode("new").tag(sync=True)
    """`new`, `running`, `pausing` (a pause waits for the model call in flight to end),
    `paused`, `stopping` (a stop waits for the call in flight to be cancelled), or the run's
    final status once it ended."""
    breakpoint_hit = Int(None, allow_none=True).tag(sync=True)
    """Index of the turn whose breakpoint paused the last `run()`/`step_iteration()`."""
    break_on_error = Bool(False).tag(sync=True)
    """Pause after a turn with a failed tool call."""
    break_on_rescued = Bool(False).tag(sync=True)
    """Pause after a turn whose tool calls were rescued from the model's text."""
    break_expression = Unicode("").tag(sync=True)
    """A Python expression; pause after a turn where it is truthy (see the class docs)."""
    break_error = Unicode("").tag(sync=True)
    """Why `break_expression` does not compile (`""` when it does): checked as it is typed."""
    gate_every_call = Bool(False).tag(sync=True)
    """Pause before every tool call: a gate predicate in `session.gates` while it is on."""
    pending_count = Int(0).tag(sync=True)
    """Tool calls held at a gate, waiting for a decision (one card each)."""
    live = Unicode("").tag(sync=True)
    """Who is answering or which tool runs right now, e.g. `Planner is answering…`."""
    run_id = Unicode("").tag(sync=True)
    """The id of the run shown (a fork's after "Edit this turn and continue")."""
    mode = Unicode("live").tag(sync=True)
    """`live` over a session, `view` over a recorded run (`thena_nb.stepper(run)`)."""

    def __init__(self, session: Session | RunView, **kwargs: Any) -> None:
        self.session = session
        self._loop: asyncio.AbstractEventLoop | None = _running_loop()
        self.task: asyncio.Future[Any] | None = None
        """The action in flight (or the last one); `await stepper.task` waits for it."""
        self.break_conditions: list[Callable[..., Any]] = []
        """Functions given to `break_when`."""
        self.parents: list[Session | RunView] = []
        """The sessions of the runs this one was forked from, the nearest last."""
        self.gate_cards: dict[str, GateCard] = {}
        """The card of each call held at a gate, by call id."""
        self.chart_delay = _CHART_DELAY_S
        """Seconds the Stepper waits after an action before it redraws the chart."""
        self.chart_task: asyncio.Task[None] | None = None
        """The pending or last chart redraw; `await stepper.chart_task` waits for it."""
        self._reset_caches()
        self._compiled: tuple[str, Any] | None = None
        self._error = ""
        self._busy = False
        self._stop_requested = False
        self._last_action = "step"
        self._last_draw = 0.0
        self._last_chart = 0.0
        self._ready = False
        self._flush_soon = False
        self._build()
        # The parts' state goes with the widget's opening message: a front end draws it whole.
        super().__init__(**self._sync_values(), **kwargs)
        self.on_msg(self._on_msg)
        link((self, "break_on_error"), (self.break_error_box, "value"))
        link((self, "break_on_rescued"), (self.break_rescued_box, "value"))
        link((self, "break_expression"), (self.break_text, "value"))
        link((self, "gate_every_call"), (self.gate_box, "value"))
        self.observe(self._expression_changed, "break_expression")
        self.observe(self._gate_toggled, "gate_every_call")
        self._fork_notes: dict[str, str] = {}
        self._attach(session)
        self._refresh(follow=True)
        if self.mode == "view" and self.turn_count:
            self.show(0)  # a recorded run reads from its start
        self._ready = True
        self.flush()

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
        self._last_loop: _Where | None = None
        self._frame_key: tuple[int, int, int, int] | None = None
        self._chart_key: Any = None
        self._live_agent: tuple[str, int | None] | None = None

    def _attach(self, session: Session | RunView) -> None:
        self.session = session
        self.mode = "live" if isinstance(session, Session) else "view"
        session.breakpoints.append(self._breakpoint)
        self._unsubscribe = session.subscribe(self._on_event)
        if self.gate_every_call and _gate_every_call not in session.gates:
            session.gates.append(_gate_every_call)
        self.run_id = session.result.run_id
        self._render_mode()

    def _detach(self) -> None:
        self._unsubscribe()
        if self._breakpoint in self.session.breakpoints:
            self.session.breakpoints.remove(self._breakpoint)

    # -- public control API -------------------------------------------------------------

    def step(self) -> asyncio.Future[Any]:
        """Run one turn; inside a `parallel` block, one branch turn (shown with its branch,
        joining the run when the block ends). The task's result is the turn (`None` when
        the step stopped at a tool gate or the run ended)."""
        self._last_action = "step"
        return self._start(self._step)

    def step_iteration(self) -> asyncio.Future[Any]:
        """Run turns to the end of the current loop iteration (or the loop's or run's end).

        A breakpoint pauses it early. Outside loops it runs one turn.
        """
        self._last_action = "step"
        return self._start(self._step_iteration)

    def run(self) -> asyncio.Future[Any]:
        """Run to the end, the next breakpoint, a `pause()` or a tool gate; the task's result
        is the `Run`."""
        self._last_action = "run"
        return self._start(self._run)

    def continue_run(self) -> asyncio.Future[Any]:
        """Go on running after a pause, a breakpoint or a gate's decisions: `run()` again."""
        return self.run()

    def pause(self) -> None:
        """Pause a `run()` at its next pause point: before the tools of the turn whose model
        is answering, else before the next model call; the run stays open:
        `continue_run()`, `step()` or `stop()` go on from there. Until it has paused,
        `status` is `"pausing"`."""
        self.session.pause()
        if self._busy and self._last_action == "run" and not self.session.done:
            self.status = "pausing"
            self._render_header()
            self._render_controls()

    def stop(self) -> asyncio.Future[Any] | None:
        """Stop the run: at once when paused; when running, a model call in flight is
        cancelled (its turn is not recorded) and tools in flight finish first. Until it is,
        `status` is `"stopping"`.

        Returns:
            The task that finishes when the run has stopped, or `None` if it already has.
        """
        if self.mode == "view":
            return None  # nothing runs in a view
        self.session.stop()
        if self.task is not None and not self.task.done():
            self._stop_requested = True
            self.status = "stopping"
            self._render_header()
            return self.task
        drive = self.session.task
        if drive is not None and not drive.done():
            return self._start(self._settle)
        self._refresh(follow=True)
        return None

    def decide(self, call_id: str, decision: Decision) -> None:
        """Decide a call held at a gate (`session.decide`); once none is left pending, the
        run goes on as the last action did (`step()` finishes the turn, `run()` runs on).

        Raises:
            GateError: No such pending call, or an edit does not fit the tool's schema.
        """
        self.session.decide(call_id, decision)
        self.pending_count = len(self.session.pending)
        if not self.session.pending:
            self._start(self._run if self._last_action == "run" else self._step)

    def edit_turn(
        self,
        index: int,
        *,
        reply: Any = None,
        tool_results: Mapping[str, str] | None = None,
    ) -> asyncio.Future[Any]:
        """Edit recorded turn `index` and continue: a fork of the run (`run.fork(index,
        reply=... | tool_results=...)`) that the Stepper then follows, stepped up to the
        edited turn; `back_to_parent()` returns to this run.

        `reply` is the model's new answer: a text (a turn with no tool call), or what
        `reply.tool(...)` / `reply.calls(...)` make. The Edit tab's box holds a tool-calling
        turn's reply as JSON (`{"text": ..., "tool_calls": [...]}`), and says what the edit
        will do before it is made.

        Raises:
            ValueError: The edit does not fit the turn (shown in the edit box too).
        """
        parent = self.session
        try:
            forked = fork_session(
                parent.result,
                index,
                reply=reply,
                tool_results=tool_results,
                workflow=parent.workflow,
                store=None if isinstance(parent, Session) else parent.store,
            )
        except (ValueError, TypeError) as exc:
            self.edit_error.value = views.error_html(views.exception_text(exc))
            raise
        self.edit_error.value = ""
        self.parents.append(parent)
        self._fork_notes[forked.result.run_id] = f"edited at turn {index}"
        self._follow(forked)
        self._last_action = "step"
        return self._start(lambda: self._step_to(index))

    def fork_here(self, at: int | None = None) -> asyncio.Future[Any]:
        """Fork the run shown into a live session from turn `at` (the shown turn by
        default) and follow it: turns `0..at-1` are reused as recorded (no model or tool
        call), and the session pauses before turn `at`, which runs live on Step or Run.
        The fork records `parent_run_id` and `forked_at == at` (as `run.fork(at)`);
        `back_to_parent()` returns to this run. The task finishes once the reused turns
        are in.

        Raises:
            ValueError: No workflow is at hand (open the view with `workflow=`), the run
                has not ended, or `at` is out of range (shown in the widget too).
        """
        parent = self.session
        at = max(self.position, 0) if at is None else at
        try:
            if parent.workflow is None:
                raise ValueError(
                    f"run {parent.result.run_id!r} has no workflow to fork it with: open it "
                    f"with `thena_nb.stepper(run, workflow=wf)` or `run.stepper(workflow=wf)`"
                )
            if not parent.done:
                raise ValueError("fork a run once it has ended (or stop it first)")
            store = None if isinstance(parent, Session) else parent.store
            forked = live_fork_session(parent.workflow, parent.result, at, store=store)
        except (ValueError, TypeError) as exc:
            self.error_html.value = views.error_html(views.exception_text(exc))
            raise
        self.parents.append(parent)
        self._fork_notes[forked.result.run_id] = f"live from turn {at}"
        self._follow(forked)
        self._last_action = "step"
        return self._start(lambda: self._step_to(at - 1) if at > 0 else _nothing())

    def back_to_parent(self) -> None:
        """Follow the run this one was forked from again (after `edit_turn`)."""
        if not self.parents:
            return
        self._follow(self.parents.pop())

    def show(self, index: int) -> None:
        """Show turn `index` (clamped to the turns so far); nothing is re-run."""
        turns = self._all_turns()
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
        """Where each loop of the recorded run would have stopped under another `until`,
        shown in words and drawn on the chart.

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
        text = until if isinstance(until, str) else callable_name(until)
        if self.what_if_text.value != text:
            self._what_if_quiet = True
            self.what_if_text.value = text
            self._what_if_quiet = False
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
        self._what_if_marks = [a.iteration for a in answers.values()]
        self._chart_key = None
        self._schedule_chart()
        return answers

    def close(self) -> None:
        """Stop listening to the session and close the widget."""
        self._detach()
        if self.chart_task is not None:
            self.chart_task.cancel()
        super().close()

    def __repr__(self) -> str:
        name = self.session.result.workflow_name
        if self.mode == "view":
            fork = "available" if self.session.workflow is not None else "needs workflow="
            return (
                f"Stepper({name!r}, view of run {self.run_id!r}, {self.status}, "
                f"turns={self.turn_count}, position={self.position}, fork={fork})"
            )
        where = f"turns={self.turn_count}, position={self.position}"
        return f"Stepper({name!r}, {self.status}, {where})"

    def _repr_mimebundle_(self, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The widget, plus a `text/html` snapshot of what it shows now: a saved notebook
        then reads well where widgets do not render (GitHub, nbviewer)."""
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        data, metadata = bundle
        self.flush()
        data["text/html"] = self.snapshot_html()
        return data, metadata

    def snapshot_html(self) -> str:
        """What the Stepper shows at this moment, as static HTML (no controls, no script):
        the header, the conversation, the shown turn, the table and the chart."""
        views_html = [
            _theme.style_html(),
            self.header.value,
            self.view_html.value if self.mode == "view" else "",
            self.position_html.value,
            self.error_html.value,
            self.transcript_html.value,
            self.turn_html.value,
            self.frame_html.value,
        ]
        if not self.chart.hidden:
            views_html.append(self.chart.value)
        body = "".join(v for v in views_html if v)
        return f'<div class="thena-stepper-snapshot {_theme.UI_CLASS}">{body}</div>'

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
            if _where(session.open_loops[: len(where)]) != where:
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

    def _follow(self, session: Session | RunView) -> None:
        """Show and drive `session` from now on (a fork, or a parent again)."""
        self._detach()
        self.session = session
        self._reset_caches()
        self._attach(session)
        self.gate_cards = {}
        self._refresh(follow=True)

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

    def _expression_changed(self, change: dict[str, Any]) -> None:
        """Compile the break expression as it is typed: an error shows at once."""
        expression = str(change["new"]).strip()
        error = ""
        if expression:
            try:
                self._compiled = (expression, compile(expression, "<break when>", "eval"))
            except SyntaxError as exc:
                error = f"break when: {exc.msg} (column {exc.offset or 0})"
        self.break_error = error
        self.break_error_html.value = views.error_html(error)

    def _gate_toggled(self, change: dict[str, Any]) -> None:
        gates = self.session.gates
        if change["new"] and _gate_every_call not in gates:
            gates.append(_gate_every_call)
        elif not change["new"] and _gate_every_call in gates:
            gates.remove(_gate_every_call)

    # -- the controls -------------------------------------------------------------------

    def _build(self) -> None:
        self._parts: dict[str, Part] = {}
        self._build_buttons()
        self._build_views()
        self._build_boxes()
        handlers: list[tuple[Button, Callable[[], Any]]] = [
            (self.step_button, self.step),
            (self.iteration_button, self.step_iteration),
            (self.run_button, self.run),
            (self.pause_button, self.pause),
            (self.continue_button, self.continue_run),
            (self.stop_button, self.stop),
            (self.back_button, self.back),
            (self.forward_button, self.forward),
            (self.what_if_button, self._what_if_clicked),
            (self.edit_button, self._edit_clicked),
            (self.parent_button, self.back_to_parent),
            (self.fork_button, self._fork_clicked),
        ]
        for b, method in handlers:
            b.on_click(lambda _, method=method: self._on_loop(method))
        self.slider.observe(lambda change: self._on_loop(lambda: self._slid(change)), "value")
        self.inspector.observe(lambda _: self._render_inspector(), "selected_index")
        self.edit_target.observe(lambda _: self._fill_edit(), "value")
        self.edit_text.observe(lambda _: self._note_edit(), "value")
        self.what_if_text.observe(self._what_if_submitted, "value")

    def _add(self, name: str, part: Any) -> Any:
        """Keep `part` as attribute `name`, drawn by the front end under that name."""
        setattr(self, name, part)
        self._parts[name] = part
        part.observe(self._dirty)
        return part

    def _build_buttons(self) -> None:
        def button(name: str, description: str, tooltip: str, icon: str = "", **kw: Any) -> None:
            self._add(name, Button(description=description, tooltip=tooltip, icon=icon, **kw))

        button("step_button", "Step", "Run one turn", "step-forward")
        button("iteration_button", "Step iteration", "Run to the end of this loop iteration")
        button("run_button", "Run", "Run to the end or the next breakpoint", "play")
        button(
            "pause_button",
            "Pause",
            "Pause at the next pause point: before this turn's tools, or the next model call",
            "pause",
        )
        button("continue_button", "Continue", "Go on running from here", "forward")
        button("stop_button", "Stop", "Stop the run", "stop")
        button("back_button", "", "Previous turn", "chevron-left")
        button("forward_button", "", "Next turn", "chevron-right")
        button("what_if_button", "What if", "Evaluate on recorded turns")
        button(
            "edit_button",
            "Edit this turn and continue",
            "Fork the run with this edit",
            button_style="warning",
        )
        button(
            "parent_button",
            "Back to the parent run",
            "Follow the run this was forked from",
            hidden=True,
        )
        button(
            "fork_button",
            "Fork from here",
            views.FORK_NEEDS_WORKFLOW,
            "code-branch",
            button_style="primary",
        )

    def _build_views(self) -> None:
        for name in _SECTIONS:
            if name not in ("live_text", "edit_text"):
                self._add(name, Html())
        self.live_label.value = views.LIVE_LABEL
        self.edit_help.value = _EDIT_HELP
        self.chart.hidden = True
        self._add("live_text", Text(disabled=True, rows=2, placeholder="(streamed text)"))
        self._add("inspector", Tabs(titles=[*_transcript.INSPECTOR_TABS, EDIT_TAB]))
        for group in ("controls", "breaks", "view_bar"):
            self._add(group, Part())
        self._add("live_box", Part(hidden=True))

    def _build_boxes(self) -> None:
        self._add("slider", Slider(description="turn #", disabled=True))
        self._add("break_error_box", Check(description="on failed tool call"))
        self._add("break_rescued_box", Check(description="on rescued call"))
        self._add("gate_box", Check(description="pause before every tool call"))
        self._add(
            "break_text",
            Text(placeholder="break when… e.g. turn.info.tool_name == 'search'"),
        )
        self._add(
            "what_if_text",
            Text(
                placeholder="what if until = … e.g. max_tool_calls(3), Enter runs it", submit=True
            ),
        )
        self._what_if_quiet = False
        self._add("edit_target", Choice(description="edit"))
        self._add("edit_text", Text(rows=6))

    # -- the front end ------------------------------------------------------------------

    def _sync_values(self) -> dict[str, Any]:
        """The synced traits that show the parts now: `s_<part>`, `parts` and `gates`."""
        values: dict[str, Any] = {}
        changing, fixed = {}, {}
        for name, part in self._parts.items():
            state = part.state()
            if name in _SECTIONS:
                values[f"s_{name}"] = state.pop("value")
            fixed[name] = {k: state.pop(k) for k in _FIXED if k in state}
            changing[name] = {k: v for k, v in state.items() if v is not False and v != ""}
        values["parts_fixed"] = fixed
        values["parts"] = changing
        values["gates"] = [card.state() for card in self.gate_cards.values()]
        return values

    def flush(self) -> None:
        """Send the front end what changed since the last time, in one message.

        A change to a part is sent on the event loop's next turn (so one action's changes
        go together), or at once when no loop runs; `flush()` sends it now.
        """
        self._flush_soon = False
        if self.comm is None and self._ready:
            return  # closed
        with self.hold_sync():
            for name, value in self._sync_values().items():
                setattr(self, name, value)

    def _dirty(self, change: Any = None) -> None:
        """A part changed: send it soon."""
        if not self._ready or self._flush_soon:
            return
        loop = _running_loop()
        if loop is None:
            self.flush()
            return
        self._flush_soon = True
        loop.call_soon(self.flush)

    def command(self, message: Mapping[str, Any]) -> None:
        """Take one command as the front end sends it: `{"part": name, "do": "click"}`
        presses a button, `{"part": name, "value": v}` sets a box, the slider or the
        inspector's tab; `{"gate": call_id, "do": "approve" | "edit" | "reject" |
        "respond", ...}` decides a gate card, with the texts of its boxes."""
        held, self._flush_soon = self._flush_soon, True  # what it changes goes in one message
        try:
            with self.hold_sync():
                call_id = message.get("gate")
                part = self._parts.get(str(message.get("part")))
                if isinstance(call_id, str) and call_id in self.gate_cards:
                    self.gate_cards[call_id].command(message)
                elif part is not None:
                    part.apply(dict(message))
                if not held:
                    self.flush()
        finally:
            self._flush_soon = held and self._flush_soon

    def _on_msg(self, widget: Any, content: Any, buffers: Any) -> None:
        if isinstance(content, dict):
            self._on_loop(lambda: self.command(content))

    def _slid(self, change: dict[str, Any]) -> None:
        if change["new"] != self.position and self._all_turns():
            self.show(change["new"])

    def _what_if_clicked(self) -> None:
        text = self.what_if_text.value.strip()
        if text:
            # `what_if` shows any error in the widget; a click has nowhere else to raise to.
            with contextlib.suppress(Exception):
                self.what_if(text)

    def _what_if_submitted(self, change: dict[str, Any]) -> None:
        """Enter in the what-if box (the box sends its value on Enter) runs it."""
        if not self._what_if_quiet:
            self._on_loop(self._what_if_clicked)

    def _edit_clicked(self) -> None:
        index, target = self.position, self.edit_target.value
        if index < 0 or target is None:
            return
        text = self.edit_text.value
        edits: dict[str, Any] = {"tool_results": {str(target): text}}
        if target == "reply":
            try:
                edits = {"reply": _edited_reply(text)}
            except ValueError as exc:
                self.edit_error.value = views.error_html(f"the reply: {exc}")
                return
        with contextlib.suppress(ValueError, TypeError):  # shown in the edit box
            self.edit_turn(index, **edits)

    def _fork_clicked(self) -> None:
        with contextlib.suppress(ValueError, TypeError):  # shown in the widget
            self.fork_here()

    def _render_mode(self) -> None:
        """Show the live controls over a session; over a recorded run, the view's status
        line and "Fork from here" instead (a view has nothing to step, stop or decide)."""
        viewing = self.mode == "view"
        for box in (self.controls, self.breaks, self.break_error_html):
            box.hidden = viewing
        self.view_bar.hidden = not viewing
        if viewing:
            run = self.session.result
            self.view_html.value = views.view_html(
                run.status,
                len(run.turns),
                run_id=run.run_id,
                can_fork=self.session.workflow is not None,
            )

    def _set_busy(self, busy: bool) -> None:
        self._busy = busy
        self.live_box.hidden = not busy
        if busy:
            self.status = "running"
            if self.position < 0:
                self.position_html.value = self._empty_position()
        self._render_controls()

    def _render_controls(self) -> None:
        session = self.session
        done = session.done
        held = bool(session.pending)
        for b in (self.step_button, self.iteration_button, self.run_button):
            b.disabled = self._busy or done or held
        self.continue_button.disabled = (
            self._busy or done or held or session.task is None or not session.paused
        )
        self.pause_button.disabled = (
            not (self._busy and self._last_action == "run") or done or self.status == "pausing"
        )
        self.stop_button.disabled = done
        n = len(self._all_turns())
        self.back_button.disabled = self.position <= 0
        self.forward_button.disabled = self.position >= n - 1
        self.slider.disabled = n == 0
        can_fork = session.workflow is not None
        self.edit_button.disabled = self._busy or self.position < 0 or not can_fork
        self.fork_button.disabled = self._busy or not can_fork
        self.fork_button.tooltip = views.fork_tooltip(self.position, can_fork=can_fork)

    # -- the views ----------------------------------------------------------------------

    def _all_turns(self) -> list[Turn]:
        """The run's turns, then the branch turns of a `parallel` block under way."""
        turns = self.session.result.turns
        return [*turns, *self._branch_turns] if self._branch_turns else turns

    def _refresh(self, *, follow: bool) -> None:
        """Bring every view up to date with the session (after an action, or at start)."""
        self._sync_turns()
        session = self.session
        if not self._busy:
            self.status = _status(session)
        n = len(self._all_turns())
        if follow and n:
            self.show(n - 1)
        elif n:
            self._render_turn(self.position)
        else:
            self._render_empty()
        run = session.result
        failed = run.error if run.status == "failed" and run.error else ""
        self.error_html.value = views.error_html(self._error or failed)
        self._render_gates()
        self._render_fork()
        self._render_header()
        if not self._busy:
            self._schedule_chart()

    def _render_header(self) -> None:
        session = self.session
        run = session.result
        hit = self.breakpoint_hit
        reason = self._break_reasons.get(hit, "") if hit is not None else ""
        stopped = [n for n in run.loops if n.stop_reason is not None or n.error is not None]
        live = self.live_label.value if self.live else ""
        self.header.value = views.header_html(
            run.workflow_name,
            self.status,
            len(run.turns),
            hit=hit,
            reason=reason,
            input=run.input,
            live=live,
            loops=session.open_loops,
            stopped=stopped[-_STOPPED_LOOPS:],
            in_block=len(self._branch_turns),
            waiting=len(session.pending),
            paused_at=session.paused_at if session.paused else None,
        )

    def _sync_turns(self) -> None:
        turns = self.session.result.turns
        n = len(turns)
        tokens = self._tokens
        total = tokens[-1] if tokens else 0
        for turn in turns[len(tokens) : n]:
            total += turn.input_tokens + turn.output_tokens
            tokens.append(total)
        shown = n + len(self._branch_turns)
        if self.slider.max != max(0, shown - 1):
            self.slider.max = max(0, shown - 1)
        self.turn_count = n

    def _render_empty(self) -> None:
        self.position = -1
        self.position_html.value = self._empty_position()
        for html in (self.turn_html, self.saw_html, self.reasoning_html, self.tools_html):
            html.value = ""
        self.frame_html.value = ""
        self.transcript_html.value = _transcript.transcript_html(self.session.result)
        self._frame_key = None
        self.edit_target.options = []
        self._render_controls()

    def _empty_position(self) -> str:
        """The position line before the first turn: what the run is doing meanwhile."""
        session = self.session
        if self.mode == "view":
            return views.EMPTY_VIEW_POSITION
        if session.pending:
            return views.EMPTY_WAITING
        if session.paused and session.paused_at == "tools":
            return views.EMPTY_PAUSED_TOOLS
        if self._busy:
            return views.EMPTY_RUNNING
        return views.EMPTY_POSITION

    def _render_turn(self, index: int) -> None:
        """Show turn `index`: the conversation, the inspector, the position line, the table."""
        turns = self._all_turns()
        turn = turns[index]
        run = self.session.result
        self.turn_html.value = views.turn_card_html(
            turn,
            would_stop=self._would_stop.get(index),
            break_reason=self._break_reasons.get(index),
        )
        tokens = self._tokens[min(index, len(self._tokens) - 1)] if self._tokens else 0
        position = views.position_html(
            turn, len(turns), limits=self._limits.get(index), tokens=tokens
        )
        if turn.branch is not None:
            waits = " (joins the run when the block ends)" if index >= len(run.turns) else ""
            position = position.replace(
                "</div>", f" · parallel branch {_html.escape(turn.branch)}{waits}</div>"
            )
        self.position_html.value = position
        self.transcript_html.value = _transcript.transcript_html(
            run,
            current=index,
            pending=self._branch_turns,
            window=_transcript.TRANSCRIPT_TURNS,
            follow=True,
        )
        lo, hi = views.frame_window(index, FRAME_ROWS, len(turns))
        if (lo, hi, len(turns), index) != self._frame_key:
            self.frame_html.value = views.frame_table_html(
                turns, lo, hi, rows=FRAME_ROWS, current=index
            )
            self._frame_key = (lo, hi, len(turns), index)
        self._render_inspector()
        self._fill_edit_targets(turn)
        self._render_controls()
        if not self._busy:
            self._schedule_chart()

    def _render_inspector(self) -> None:
        """Fill the inspector's selected tab for the shown turn (the others when opened)."""
        turns = self._all_turns()
        if not 0 <= self.position < len(turns):
            return
        turn, run = turns[self.position], self.session.result
        tab = self.inspector.selected_index or 0
        if tab == 1:
            # A recorded run may not know its workflow; the one the view was given renders.
            model = (
                _transcript.model_of(self.session.workflow, turn) if self.mode == "view" else None
            )
            self.saw_html.value = _transcript.saw_html(run, turn, model=model)
        elif tab == 2:
            self.reasoning_html.value = _transcript.reasoning_html(turn)
        elif tab == 3:
            self.tools_html.value = _transcript.tools_html(turn)

    def _fill_edit_targets(self, turn: Turn) -> None:
        reply = "the reply (text and tool calls)" if turn.tool_calls else "the reply"
        options: list[tuple[str, str]] = [(reply, "reply")]
        options += [(f"result of {c.name} ({c.id})", c.id) for c in turn.tool_calls]
        if list(self.edit_target.options) != options:
            self.edit_target.options = options
            self.edit_target.value = "reply"
        self._fill_edit()

    def _fill_edit(self) -> None:
        turns = self._all_turns()
        if not 0 <= self.position < len(turns):
            return
        turn, target = turns[self.position], self.edit_target.value
        if target == "reply":
            self.edit_text.value = views.reply_text(turn)
        else:
            call = next((c for c in turn.tool_calls if c.id == target), None)
            self.edit_text.value = (call.result or call.error or "") if call is not None else ""
        self._note_edit()

    def _note_edit(self) -> None:
        """Say under the edit box what "Edit this turn and continue" will do with its text."""
        turns = self._all_turns()
        if not 0 <= self.position < len(turns):
            self.edit_note.value = ""
            return
        turn = turns[self.position]
        self.edit_note.value = views.edit_note_html(
            turn, self.edit_target.value, self.edit_text.value
        )

    def _render_gates(self) -> None:
        """One card per call held at a gate; cards of decided calls go."""
        pending = self.session.pending
        self.pending_count = len(pending)
        cards = {}
        for held in pending:
            card = self.gate_cards.get(held.call.id)
            if card is None or card.decided is not None:
                schema = tool_schema(self.session.workflow, held)
                card = GateCard(held, schema, self.decide, on_change=self._dirty)
            cards[held.call.id] = card
        self.gate_cards = cards
        self._dirty()

    def _render_fork(self) -> None:
        run = self.session.result
        if run.parent_run_id is None or not self.parents:
            self.fork_html.value = ""
            self.parent_button.hidden = True
            return
        how = self._fork_notes.get(run.run_id, f"at turn {run.forked_at}")
        self.fork_html.value = (
            f"<div>a fork of run <code>{_html.escape(run.parent_run_id)}</code>, "
            f"{_html.escape(how)}</div>"
        )
        self.parent_button.hidden = False

    def _schedule_chart(self) -> None:
        """Redraw the failure chart soon, unless another action starts first.

        On a long run drawing takes a while, so it stays off the path of a step: each
        action ends without it, and a quick next click cancels a pending draw.
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
        loops = run.loops
        shown = loops[-views.CHART_LOOPS :]
        marks = self._what_if_marks
        key = (
            len(run.turns),
            self.position,
            tuple(marks or ()),
            tuple((n.path, n.iterations, n.stop_reason) for n in shown),
        )
        if key == self._chart_key:
            return
        self._chart_key = key
        if not shown:  # nothing to draw until a loop has started
            self.chart.hidden = True
            return
        what_if = marks[-len(shown) :] if marks is not None and len(marks) == len(loops) else None
        self.chart.value = _svg_chart.failure_chart_svg(
            run.turns, shown, current=self.position, what_if=what_if
        )
        self.chart.hidden = False


# -- helpers ------------------------------------------------------------------------------


async def _nothing() -> None:
    """An action with nothing to do (a fork from turn 0 has no turn to reuse)."""


def _edited_reply(text: str) -> Any:
    """The reply an edit of "the reply" makes: its text, or, in the JSON form the edit box
    shows a tool-calling turn in, a reply with those calls (as `reply.calls` makes it).

    Raises:
        ValueError: The JSON form is malformed (`views.parsed_reply` says how).
    """
    parsed = views.parsed_reply(text)
    if parsed is None:
        return text
    said, calls = parsed
    if not calls:
        return said
    made = [ToolCall(id="", name=name, arguments=args, source="native") for name, args in calls]
    return Reply(text=said, tool_calls=made, finish_reason="tool_use")


def _status(session: Session | RunView) -> str:
    """What the session is doing at this moment, as the Stepper's `status` says it."""
    if session.done:
        return str(session.result.status)
    if session.task is None:
        return "new"
    return "paused" if session.paused else "running"


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


def _loop_steps(session: Session | RunView) -> dict[str, LoopStep]:
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
