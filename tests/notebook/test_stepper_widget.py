"""The Stepper as one anywidget: the front end's commands, what it is sent, and how much.

The front end (`thena_nb/notebook/static/stepper.js`) draws the parts by name and sends
commands back; these drive the widget through the same `command` entry its messages reach,
and read what would be sent through a stand-in comm that records each message.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import add_call, calc

import thena_nb
from thena_nb import Workflow, loop, until_answered
from thena_nb.notebook.stepper import Stepper

pytestmark = pytest.mark.anyio

STATIC = Path(thena_nb.__file__).parent / "notebook" / "static"


class Recorder:
    """A comm that keeps the state each message would carry to the front end."""

    kernel = True
    comm_id = "recorder"

    def __init__(self) -> None:
        self.states: list[dict[str, Any]] = []

    def send(self, data: Any = None, metadata: Any = None, buffers: Any = None) -> None:
        self.states.append(dict(data.get("state", {})))

    def close(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to close."""

    def on_msg(self, callback: Any) -> None:
        """Nothing is received."""

    def take(self) -> tuple[int, set[str]]:
        """Bytes and trait names sent since the last call."""
        size = sum(len(json.dumps(s).encode()) for s in self.states)
        names = {name for s in self.states for name in s}
        self.states.clear()
        return size, names


def recorded(stepper: Stepper) -> Recorder:
    recorder = Recorder()
    stepper.comm = recorder
    return recorder


def run_of(turns: int) -> thena_nb.Run:
    replies: list[object] = [add_call(i, 1) for i in range(turns - 1)] + ["done"]
    wf = Workflow("w", [loop(steps=[calc(replies)], until=until_answered, max_iterations=turns)])
    return wf.run("go", store=False)


def test_every_part_the_front_end_lays_out_is_a_part_of_the_widget() -> None:
    script = (STATIC / "stepper.js").read_text()
    named = set(re.findall(r'"([a-z_]+_(?:button|html|box|text|label|help|note|error))"', script))
    named |= {"header", "slider", "chart", "edit_target", "controls", "breaks", "view_bar"}
    named -= {"break_label"}  # the front end's own bold "break"
    stepper = run_of(2).stepper()
    assert named <= set(stepper.parts) and named <= set(stepper.parts_fixed)
    sections = {name[2:] for name in stepper.trait_names() if name.startswith("s_")}
    assert sections <= named | {"edit_help"}


def test_the_front_end_and_its_styles_ship_in_the_package() -> None:
    stepper = run_of(2).stepper()
    assert stepper._esm == (STATIC / "stepper.js").read_text()
    assert "export default { render }" in stepper._esm
    assert "import " not in stepper._esm and "http" not in stepper._esm  # nothing fetched
    assert ".thena-stepper .thena-scrub" in stepper._css and ".dark .thena-ui" in stepper._css


async def test_commands_press_buttons_move_the_slider_and_switch_tabs() -> None:
    wf = Workflow(
        "w", [loop(steps=[calc([add_call(1, 2), add_call(3, 4), "7"])], until=until_answered)]
    )
    stepper = wf.stepper("go")
    stepper.command({"part": "run_button", "do": "click"})
    assert stepper.task is not None
    await stepper.task
    assert (stepper.status, stepper.position) == ("finished", 2)
    stepper.command({"part": "slider", "value": 0})
    assert stepper.position == 0 and "turn #0 (1st of 3)" in stepper.s_position_html
    stepper.command({"part": "slider", "value": 99})  # past the end: the last turn
    assert stepper.position == 2
    stepper.command({"part": "inspector", "value": 3})
    assert (
        stepper.inspector.selected_index == 3 and stepper.parts["inspector"]["selected_index"] == 3
    )
    assert "<code>add</code>" not in stepper.s_tools_html or stepper.position == 2
    stepper.command({"part": "break_text", "value": "turn.index == ("})
    assert stepper.break_expression == "turn.index == ("
    assert "break when:" in stepper.s_break_error_html
    stepper.command({"part": "step_button", "do": "click"})  # disabled: the run has ended
    stepper.command({"part": "no_such_part", "do": "click"})
    stepper.command({"gate": "no-such-call", "do": "approve"})
    assert stepper.turn_count == 3


async def test_a_gate_card_is_decided_from_the_front_end_with_its_boxes_text() -> None:
    from thena_nb import Agent, tool
    from thena_nb.models import ScriptedModel, reply

    def pay(amount: int) -> str:
        """Pay an amount."""
        return f"paid {amount}"

    calls = reply.calls([("pay", {"amount": 1}), ("pay", {"amount": 2})])
    clerk = Agent("Clerk", model=ScriptedModel([calls, "done"]), tools=[tool(pay, gate=True)])
    stepper = Workflow("pay", [clerk]).stepper("pay")
    comm = recorded(stepper)
    await stepper.step()
    stepper.flush()
    first, second = (card["id"] for card in stepper.gates)
    stepper.command({"gate": first, "do": "edit", "editor": '{"amount": "x"}'})
    card = stepper.gates[0]
    assert "amount must be an integer" in card["error"] and not card["decided"]
    assert card["editor"] == '{"amount": "x"}'
    _, sent = comm.take()
    assert "gates" in sent
    stepper.command({"gate": first, "do": "edit", "editor": '{"amount": 5}'})
    stepper.command({"gate": second, "do": "reject", "reason": "not <this>"})
    assert stepper.task is not None
    await stepper.task
    calls_made = stepper.session.result.turns[0].tool_calls
    assert [c.decision for c in calls_made] == ["edit", "reject"]
    assert calls_made[0].result == "paid 5" and "not <this>" in (calls_made[1].error or "")
    stepper.flush()
    assert stepper.gates == []


def test_a_move_sends_only_what_is_shown_whatever_the_run_length() -> None:
    sizes = {}
    for turns in (60, 300):  # both more than the transcript shows (40 turns)
        stepper = thena_nb.stepper(run_of(turns))
        comm = recorded(stepper)
        stepper.command({"part": "slider", "value": turns - 1})  # to the last turn
        comm.take()
        stepper.command({"part": "back_button", "do": "click"})
        messages = len(comm.states)
        size, names = comm.take()
        assert messages == 1 and stepper.position == turns - 2
        assert "s_transcript_html" in names and "s_position_html" in names
        assert "s_header" not in names and "parts_fixed" not in names  # unchanged: not sent
        sizes[turns] = size
    # one message per move, bounded by the window shown, not by the turns recorded
    assert sizes[300] < 40_000 and abs(sizes[300] - sizes[60]) < 0.15 * sizes[60], sizes
