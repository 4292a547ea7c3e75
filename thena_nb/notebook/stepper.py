"""The Stepper: a debugger for one live `Session`, turn by turn.

One `anywidget.AnyWidget` with a small ES module shipped in the package (`static/stepper.js`,
no build step, nothing fetched at run time), so it renders wherever anywidget does:
JupyterLab, Jupyter Notebook, VS Code, Colab and marimo. Python keeps the session, the gates
and every view; the front end lays out the parts (`_widget_parts`: HTML sections Python made,
buttons, checkboxes, text boxes, the turn slider, the inspector's tabs, the gate cards) and
sends back commands (`model.send`), which `command` hands to the part they name: a button's
`click()`, a box's `value`. Only what is shown is sent, and only when it changed: each HTML
section is a trait of its own (`s_<part>`), the small state of every part is `parts`, the
gate cards `gates`. Every control calls a public method
(`step`, `step_iteration`, `run`, `pause`, `continue_run`, `stop`, `show`, `back`,
`forward`, `what_if`, `decide`, `edit_turn`, `back_to_parent`), and the state a late view
needs (position, status, turn count, breakpoint hit, pending calls) lives in traits.

Work never blocks the kernel: a button schedules a task on the running event loop and returns;
the task is `stepper.task` (awaitable), and a click while it runs is ignored, so there is never
a second turn in flight.

This module holds the class: its traits, `__init__`, the public methods and the reprs. The
rest comes from mixins, one job each: `_stepper_controls` (the parts, what each does, what
goes to the front end), `_stepper_render` (the run drawn into the parts), `_stepper_host`
(the session driven on the event loop, one action at a time) and `_stepper_events` (the
session's events, what each turn leaves noted, the breakpoints). How each part looks is
`_stepper_views`, `_transcript` (the conversation, the inspector, the turn table) and
`_svg_chart`; the gate cards and the edit-and-continue fork are `_stepper_gates`. It reads the
run through the public `Session`: `result`, `context`, `open_loops`, `pending`, `decide`,
events.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anywidget
from traitlets import Bool, Dict, Int, List, Unicode, link

from thena_nb.core.engine.session import Session
from thena_nb.core.parts.steps import callable_name
from thena_nb.core.records.decisions import Decision
from thena_nb.core.runs.what_if import WhatIf
from thena_nb.notebook import _stepper_views as views
from thena_nb.notebook import _theme
from thena_nb.notebook._stepper_controls import EDIT_TAB, _Controls
from thena_nb.notebook._stepper_events import _Events
from thena_nb.notebook._stepper_gates import GateCard, fork_session, live_fork_session
from thena_nb.notebook._stepper_host import _Host, running_loop
from thena_nb.notebook._stepper_render import FRAME_ROWS, _Render
from thena_nb.notebook._stepper_run import RecordedSession

__all__ = ["EDIT_TAB", "FRAME_ROWS", "Stepper"]

_CHART_DELAY_S = 0.2
"""Seconds after an action before the chart is redrawn (`chart_delay`)."""
_STATIC = Path(__file__).parent / "static"


class Stepper(_Controls, _Render, _Host, _Events, anywidget.AnyWidget):
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
            run's `RecordedSession` (what `thena_nb.stepper(run)` passes) for view mode.
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

    def __init__(self, session: Session | RecordedSession, **kwargs: Any) -> None:
        self.session = session
        self._loop: asyncio.AbstractEventLoop | None = running_loop()
        self.task: asyncio.Future[Any] | None = None
        """The action in flight (or the last one); `await stepper.task` waits for it."""
        self.break_conditions: list[Callable[..., Any]] = []
        """Functions given to `break_when`."""
        self.parents: list[Session | RecordedSession] = []
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

    # -- the front end ------------------------------------------------------------------

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


async def _nothing() -> None:
    """An action with nothing to do (a fork from turn 0 has no turn to reuse)."""
