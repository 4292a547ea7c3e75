"""The Stepper's controls: its parts, what each one does, and what goes to the front end.

`_build` makes every part the front end draws (`_widget_parts`: the buttons, the HTML
sections, the check boxes, the text boxes, the turn slider, the inspector's tabs, the edit
box) and wires each to what it does: a button to its public method (`step`, `run`,
`pause`, `stop`, `back`, ...) or to a handler here ("What if", "Edit this turn and
continue", "Fork from here"), the slider to `show`, the inspector's tab and the edit box to
their views. The observers of the `break_expression` and `gate_every_call` traits live here
too. A changed part is sent soon (`_dirty`), all of them as traits (`_sync_values`: `s_<part>`,
`parts`, `parts_fixed`, `gates`); a message from the front end comes in through `_on_msg`.
A mixin of `Stepper`, which combines it with the others; the attributes it declares are the
widget's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from thena_nb.core.engine.session import Session
from thena_nb.core.records.model import Reply
from thena_nb.core.records.types import ToolCall, Turn
from thena_nb.core.runs.what_if import WhatIf
from thena_nb.notebook import _stepper_views as views
from thena_nb.notebook import _transcript
from thena_nb.notebook._stepper_host import every_call, running_loop
from thena_nb.notebook._widget_parts import (
    Button,
    Check,
    Choice,
    Html,
    Part,
    Slider,
    StepperParts,
    Tabs,
    Text,
)

if TYPE_CHECKING:
    from thena_nb.notebook._stepper_gates import GateCard
    from thena_nb.notebook._stepper_run import RecordedSession

__all__ = ["EDIT_TAB"]

EDIT_TAB = "Edit"
"""The inspector's last tab: edit the shown turn's reply or a tool result, then fork."""
_EDIT_HELP = (
    "<div>Edit the reply or a tool result of the shown turn, then fork the run from it: "
    "the Stepper follows the fork (a button leads back to this run).</div>"
)
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


class _Controls(StepperParts):
    """Build the parts and wire them to what they do (a mixin of `Stepper`)."""

    session: Session | RecordedSession
    gate_cards: dict[str, GateCard]
    position: int
    break_error: str
    _compiled: tuple[str, Any] | None
    _ready: bool
    _flush_soon: bool

    if TYPE_CHECKING:  # the Stepper's, and the other mixins'

        def step(self) -> asyncio.Future[Any]: ...
        def step_iteration(self) -> asyncio.Future[Any]: ...
        def run(self) -> asyncio.Future[Any]: ...
        def continue_run(self) -> asyncio.Future[Any]: ...
        def pause(self) -> None: ...
        def stop(self) -> asyncio.Future[Any] | None: ...
        def back(self) -> None: ...
        def forward(self) -> None: ...
        def show(self, index: int) -> None: ...
        def back_to_parent(self) -> None: ...
        def what_if(self, until: Callable[..., Any] | str) -> dict[str, WhatIf]: ...
        def edit_turn(
            self,
            index: int,
            *,
            reply: Any = None,
            tool_results: Mapping[str, str] | None = None,
        ) -> asyncio.Future[Any]: ...
        def fork_here(self, at: int | None = None) -> asyncio.Future[Any]: ...
        def flush(self) -> None: ...
        def command(self, message: Mapping[str, Any]) -> None: ...
        def _on_loop(self, fn: Callable[[], Any]) -> None: ...
        def _all_turns(self) -> list[Turn]: ...
        def _render_inspector(self) -> None: ...
        def _fill_edit(self) -> None: ...
        def _note_edit(self) -> None: ...

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

    def _dirty(self, change: Any = None) -> None:
        """A part changed: send it soon."""
        if not self._ready or self._flush_soon:
            return
        loop = running_loop()
        if loop is None:
            self.flush()
            return
        self._flush_soon = True
        loop.call_soon(self.flush)

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
        if change["new"] and every_call not in gates:
            gates.append(every_call)
        elif not change["new"] and every_call in gates:
            gates.remove(every_call)


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
