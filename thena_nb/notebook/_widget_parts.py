"""The parts of a widget drawn by its own front-end module: plain traitlets objects.

The Stepper is one `anywidget.AnyWidget`; what it shows is made of these parts, each named,
each holding the state its front end draws (an HTML section, a button, a checkbox, a text
box, a choice, the turn slider, the inspector's tabs) and nothing else. Python changes a
part's traits (`part.value = ...`, `button.disabled = True`), observes them (`observe`,
`link`) and presses buttons (`button.click()`) as the front end's commands do; the widget
sends the changed parts' state to its front end (`state()`), and hands each command from
there to the part it names (`apply`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from traitlets import Any as AnyTrait
from traitlets import Bool, HasTraits, Int, List, Unicode

__all__ = ["Button", "Check", "Choice", "Html", "Part", "Slider", "StepperParts", "Tabs", "Text"]


class Part(HasTraits):
    """One named piece of what a widget shows; `hidden` leaves it out of the page."""

    hidden = Bool(False)
    kind = "part"
    """What the front end draws it as."""

    def state(self) -> dict[str, Any]:
        """What the front end needs to draw the part: its kind and traits, as JSON values."""
        state = {name: _json(getattr(self, name)) for name in sorted(self.trait_names())}
        state["kind"] = self.kind
        return state

    def apply(self, message: dict[str, Any]) -> None:
        """Take a command from the front end (by default, none is taken)."""


class Html(Part):
    """A section of HTML made in Python (text in it is escaped where it is made)."""

    kind = "html"

    value = Unicode("")


class Button(Part):
    """A button: `click()` calls every handler given to `on_click`, unless it is disabled."""

    kind = "button"

    description = Unicode("")
    tooltip = Unicode("")
    icon = Unicode("")
    button_style = Unicode("")
    disabled = Bool(False)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._handlers: list[Callable[..., Any]] = []

    def on_click(self, handler: Callable[..., Any]) -> None:
        """Call `handler(button)` on each click."""
        self._handlers.append(handler)

    def click(self) -> None:
        """Press the button, as a click in the page does (a disabled one does nothing)."""
        if self.disabled:
            return
        for handler in list(self._handlers):
            handler(self)

    def apply(self, message: dict[str, Any]) -> None:
        if message.get("do") == "click":
            self.click()


class Check(Part):
    """A checkbox with its label."""

    kind = "check"

    description = Unicode("")
    value = Bool(False)

    def apply(self, message: dict[str, Any]) -> None:
        if "value" in message:
            self.value = bool(message["value"])


class Text(Part):
    """A text box (`rows > 1`: a text area); `submit`: it sends its text on Enter only."""

    kind = "text"

    value = Unicode("")
    placeholder = Unicode("")
    rows = Int(1)
    disabled = Bool(False)
    submit = Bool(False)

    def apply(self, message: dict[str, Any]) -> None:
        if "value" in message and not self.disabled:
            self.value = str(message["value"])


class Choice(Part):
    """A drop-down: `options` are `(label, value)` pairs, `value` the chosen one's value."""

    kind = "choice"

    description = Unicode("")
    options: List[Any] = List()
    value = AnyTrait(None, allow_none=True)

    def apply(self, message: dict[str, Any]) -> None:
        values = [value for _, value in self.options]
        if message.get("value") in values:
            self.value = message["value"]


class Slider(Part):
    """The turn slider: an integer from 0 to `max`."""

    kind = "slider"

    description = Unicode("")
    value = Int(0)
    max = Int(0)
    disabled = Bool(False)

    def apply(self, message: dict[str, Any]) -> None:
        if "value" in message and not self.disabled:
            self.value = max(0, min(int(message["value"]), self.max))


class Tabs(Part):
    """Tab titles and the selected one; the panes are other parts, drawn by the front end."""

    kind = "tabs"

    titles: List[Any] = List()
    selected_index = Int(0)

    def apply(self, message: dict[str, Any]) -> None:
        index = message.get("value")
        if isinstance(index, int) and 0 <= index < len(self.titles):
            self.selected_index = index


def _json(value: Any) -> Any:
    """A trait's value as JSON has it (tuples are lists)."""
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    return value


class StepperParts:
    """The parts `Stepper._build` makes (`_add` keeps each as an attribute of its name),
    declared once for the mixins that use them."""

    step_button: Button
    iteration_button: Button
    run_button: Button
    pause_button: Button
    continue_button: Button
    stop_button: Button
    back_button: Button
    forward_button: Button
    what_if_button: Button
    edit_button: Button
    parent_button: Button
    fork_button: Button
    header: Html
    view_html: Html
    position_html: Html
    error_html: Html
    live_label: Html
    live_text: Text
    transcript_html: Html
    turn_html: Html
    saw_html: Html
    reasoning_html: Html
    tools_html: Html
    edit_help: Html
    edit_text: Text
    edit_note: Html
    edit_error: Html
    frame_html: Html
    chart: Html
    what_if_html: Html
    fork_html: Html
    break_error_html: Html
    inspector: Tabs
    controls: Part
    breaks: Part
    view_bar: Part
    live_box: Part
    slider: Slider
    break_error_box: Check
    break_rescued_box: Check
    gate_box: Check
    break_text: Text
    what_if_text: Text
    edit_target: Choice
