"""The Stepper's views, brought up to date with the run: every HTML section, every control's state.

`_refresh` redraws after an action (or at start): the turn count and the slider's range, the
shown turn (`_render_turn`: the turn card, the position line, the conversation, the turn
table, the inspector's open tab, the Edit tab's box), the error line, one gate card per held
call, the fork line and the header; `_render_controls` enables what can be done now; the
failure chart is redrawn soon after, off the path of a step (`_schedule_chart`). How each part
looks is `_stepper_views`, `_transcript` and `_svg_chart`, pure functions of the run; this
module chooses what to draw and where. A mixin of `Stepper`, which combines it with the
others; the attributes it declares are the widget's.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from thena_nb.core.engine.session import Session
from thena_nb.core.records import _html
from thena_nb.core.records.decisions import Decision
from thena_nb.core.records.types import Turn
from thena_nb.notebook import _stepper_views as views
from thena_nb.notebook import _svg_chart, _transcript
from thena_nb.notebook._stepper_gates import GateCard, tool_schema
from thena_nb.notebook._stepper_host import running_loop
from thena_nb.notebook._widget_parts import StepperParts

if TYPE_CHECKING:
    from thena_nb.notebook._stepper_run import RecordedSession

__all__ = ["FRAME_ROWS"]

FRAME_ROWS = 20
"""Rows of the turn frame: every turn when they fit, else this many around the shown one."""
_STOPPED_LOOPS = 4
"""Stopped loops the header names, the latest ones."""


class _Render(StepperParts):
    """Draw the run into the Stepper's parts (a mixin of `Stepper`)."""

    session: Session | RecordedSession
    gate_cards: dict[str, GateCard]
    parents: list[Session | RecordedSession]
    chart_delay: float
    chart_task: asyncio.Task[None] | None
    status: str
    mode: str
    live: str
    position: int
    turn_count: int
    pending_count: int
    breakpoint_hit: int | None
    _busy: bool
    _error: str
    _last_action: str
    _fork_notes: dict[str, str]
    _tokens: list[int]
    _branch_turns: list[Turn]
    _limits: dict[int, tuple[int, float]]
    _would_stop: dict[int, str]
    _break_reasons: dict[int, str]
    _what_if_marks: list[int | None] | None
    _frame_key: tuple[int, int, int, int] | None
    _chart_key: Any

    if TYPE_CHECKING:  # the Stepper's, and the other mixins'

        def show(self, index: int) -> None: ...
        def decide(self, call_id: str, decision: Decision) -> None: ...
        def _dirty(self, change: Any = None) -> None: ...

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
        loop = running_loop()
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


def _status(session: Session | RecordedSession) -> str:
    """What the session is doing at this moment, as the Stepper's `status` says it."""
    if session.done:
        return str(session.result.status)
    if session.task is None:
        return "new"
    return "paused" if session.paused else "running"
