"""The Stepper, driven by clicking its buttons programmatically on offline workflows."""

from __future__ import annotations

import asyncio
import math
import re
from typing import Any

import anywidget
import pytest
from helpers import HeldModel, add, add_call, calc, fail_call

from thena_nb import Agent, ModelError, Workflow, loop, max_tool_calls, until_answered, until_text
from thena_nb.core.records.model import ModelRequest
from thena_nb.models import FunctionModel, ScriptedModel, reply
from thena_nb.notebook import Stepper
from thena_nb.notebook._widget_parts import Button
from thena_nb.notebook.stepper import FRAME_ROWS

pytestmark = pytest.mark.anyio

SVG = '<div class="thena-chart"><svg'
HOSTILE = "<script>window.__pwned = 1</script><img src=x onerror=alert(1)> & done"
ADD = reply.tool("add", a=1, b=1)
RESCUED = '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'


def looped(replies: list[Any], **kw: Any) -> tuple[Workflow, ScriptedModel]:
    agent = calc(replies)
    wf = Workflow("w", [loop(steps=[agent], until=until_answered, **kw)])
    assert isinstance(agent.model, ScriptedModel)
    return wf, agent.model


def frame_rows(stepper: Stepper) -> int:
    """Rows of the frame table's body."""
    body = stepper.frame_html.value.split("<tbody>", 1)[1]
    return body.count("<tr")


async def chart_svg(stepper: Stepper) -> str:
    """The chart (inline SVG) once the redraw that follows the last action has finished."""
    assert stepper.chart_task is not None
    await stepper.chart_task
    return str(stepper.chart.value)


async def click(button: Button, stepper: Stepper) -> Any:
    """Press `button` as the front end does: a command naming it, to the widget."""
    name = next(name for name, part in stepper.parts.items() if getattr(stepper, name) is button)
    assert stepper.parts_fixed[name]["kind"] == "button"
    stepper.command({"part": name, "do": "click"})
    assert stepper.task is not None
    return await stepper.task


async def test_a_new_stepper_is_a_widget_that_has_run_nothing() -> None:
    wf, model = looped(["done"])
    stepper = wf.stepper("go")
    assert isinstance(stepper, Stepper) and isinstance(stepper, anywidget.AnyWidget)
    bundle, _ = stepper._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert (stepper.status, stepper.turn_count, stepper.position) == ("new", 0, -1)
    assert "no turns yet" in stepper.position_html.value
    assert stepper.slider.disabled and model.requests == []


async def test_step_three_times_shows_each_turn_frame_and_chart() -> None:
    wf, model = looped([add_call(1, 2), add_call(3, 4), "the sum is 10"])
    stepper = wf.stepper("go")
    stepper.chart_delay = 0
    assert stepper.chart.hidden and stepper.parts["chart"]["hidden"]
    turn = await click(stepper.step_button, stepper)
    assert turn.index == 0 and stepper.status == "paused"
    assert (stepper.turn_count, stepper.position) == (1, 0)
    first_chart = await chart_svg(stepper)
    stepper.flush()
    assert not stepper.chart.hidden and stepper.s_chart == first_chart
    assert first_chart.startswith(SVG)

    await click(stepper.step_button, stepper)
    panel = stepper.turn_html.value
    assert "<code>add</code>" in panel and "{&quot;a&quot;: 3, &quot;b&quot;: 4}" in panel
    assert ">7</pre>" in panel  # the tool's result
    assert "native" in panel and "tool_use" in panel
    assert "would stop: <b>no</b>" in panel
    assert frame_rows(stepper) == 2
    chart = await chart_svg(stepper)
    assert chart.startswith(SVG) and chart != first_chart

    await click(stepper.step_button, stepper)
    assert stepper.status == "finished" and stepper.turn_count == 3
    assert frame_rows(stepper) == 3
    assert "the sum is 10" in stepper.turn_html.value
    assert "would stop: <b>yes</b>" in stepper.turn_html.value
    line = stepper.position_html.value
    assert "turn #2 (3rd of 3)" in line and "<code>w/0.loop/0.Calc</code>" in line
    assert "loop iteration 3 of 10" in line and "consecutive fails after it 0 of 5" in line
    assert all(b.disabled for b in (stepper.step_button, stepper.run_button))
    assert len(model.requests) == 3


async def test_the_chart_is_redrawn_after_an_action_not_during_it() -> None:
    wf, _ = looped([add_call(), add_call(), "done"])
    stepper = wf.stepper("go")
    await stepper.step()
    pending = stepper.chart_task
    assert pending is not None and not pending.done()
    await stepper.step()  # a quick second step: the first redraw is dropped
    assert pending.cancelled() or pending.done()
    assert (await chart_svg(stepper)).startswith(SVG)


async def test_position_line_counts_fails_and_tokens() -> None:
    replies: list[object] = [
        reply.tool("fail", input_tokens=10, output_tokens=5),
        reply.tool("fail", input_tokens=20, output_tokens=5),
        reply.text("ok", input_tokens=1, output_tokens=1),
    ]
    wf = Workflow("w", [loop(steps=[calc(replies)], until=until_answered, max_fails=3)])
    stepper = wf.stepper("go")
    await stepper.step()
    await stepper.step()
    line = stepper.position_html.value
    assert "consecutive fails after it 2 of 3 ·" in line and "tokens so far 40" in line
    assert "failed" in stepper.turn_html.value and "ValueError" in stepper.turn_html.value


async def test_position_line_says_off_for_an_infinite_max_fails() -> None:
    wf, _ = looped([fail_call(), "done"], max_fails=math.inf)
    stepper = wf.stepper("go")
    await stepper.step()
    assert "consecutive fails after it 1 of off ·" in stepper.position_html.value


async def test_run_goes_to_the_end() -> None:
    wf, _ = looped([add_call(), add_call(), "done"])
    stepper = wf.stepper("go")
    run = await click(stepper.run_button, stepper)
    assert run.status == "finished" and stepper.status == "finished"
    assert stepper.turn_count == 3 and stepper.position == 2
    assert stepper.breakpoint_hit is None
    assert "finished" in stepper.header.value


async def test_step_iteration_runs_every_turn_of_one_iteration() -> None:
    worker = calc([add_call(), add_call(), add_call()], name="Worker")
    checker = Agent("Checker", model=ScriptedModel(["again", "again", "stop"]))
    wf = Workflow("w", [loop(steps=[worker, checker], until=until_text("stop"), max_iterations=5)])
    stepper = wf.stepper("go")
    last = await click(stepper.iteration_button, stepper)
    assert last.agent == "Checker" and stepper.turn_count == 2
    await stepper.step()  # the first turn of iteration 2 ...
    last = await stepper.step_iteration()  # ... and the rest of it
    assert last.agent == "Checker" and stepper.turn_count == 4
    assert "loop iteration 2 of 5" in stepper.position_html.value
    await stepper.step_iteration()
    assert stepper.turn_count == 6 and stepper.status == "finished"
    assert await stepper.step_iteration() is None


def nested(inner_replies: list[object], outer_replies: list[object]) -> Workflow:
    """An inner tool loop, then an `Outer` agent, in an outer loop that stops on "stop"."""
    inner = calc(inner_replies, name="Inner")
    outer = Agent("Outer", model=ScriptedModel(outer_replies))
    inner_loop = loop(steps=[inner], until=until_answered, max_iterations=3, max_fails=4)
    outer_loop = loop(steps=[inner_loop, outer], until=until_text("stop"), max_iterations=5)
    return Workflow("w", [outer_loop])


async def test_step_iteration_in_nested_loops_stops_at_the_innermost_iteration() -> None:
    wf = nested([add_call(), "inner done", add_call(), "inner done"], ["again", "stop"])
    stepper = wf.stepper("go")
    agents = []
    while (turn := await stepper.step_iteration()) is not None:
        agents.append((turn.agent, turn.iteration, stepper.turn_count))
    # one turn per iteration, whichever loop it belongs to
    assert agents == [
        ("Inner", 1, 1),
        ("Inner", 2, 2),
        ("Outer", 1, 3),
        ("Inner", 1, 4),
        ("Inner", 2, 5),
        ("Outer", 2, 6),
    ]


async def test_a_nested_loop_that_starts_over_ends_the_iteration() -> None:
    """Inner iteration 1 of the next outer iteration is another iteration than the last one."""
    inner = Agent("Inner", model=ScriptedModel(["one", "two", "three"]))
    inner_loop = loop(steps=[inner], until=until_answered)
    wf = Workflow("w", [loop(steps=[inner_loop], until=until_text("three"))])
    stepper = wf.stepper("go")
    for n in (1, 2, 3):
        turn = await stepper.step_iteration()
        assert (turn.iteration, stepper.turn_count) == (1, n)
    assert stepper.status == "finished"


async def test_the_position_line_and_verdict_are_the_loop_the_turn_ran_in() -> None:
    wf = nested(["inner done"], ["stop"])
    stepper = wf.stepper("go")
    await stepper.step()
    line = stepper.position_html.value
    assert "ran in loop iteration 1 of 3 · consecutive fails after it 0 of 4 ·" in line
    assert "until <code>until_answered</code> would stop: <b>yes</b>" in stepper.turn_html.value
    await stepper.step()
    line = stepper.position_html.value
    assert "step <code>w/0.loop/1.Outer</code>" in line
    assert "ran in loop iteration 1 of 5 · consecutive fails after it 0 of 5 ·" in line
    assert "would stop: <b>yes</b>" in stepper.turn_html.value
    assert "until_answered" not in stepper.turn_html.value.split("thena-would-stop")[1]


async def test_step_iteration_outside_a_loop_runs_one_turn() -> None:
    a = Agent("A", model=ScriptedModel(["a"]))
    b = Agent("B", model=ScriptedModel(["b"]))
    stepper = Workflow("w", [a, b]).stepper("go")
    await stepper.step_iteration()
    assert stepper.turn_count == 1
    assert "not in a loop" in stepper.position_html.value


async def test_break_on_failed_tool_call() -> None:
    wf, _ = looped([add_call(), fail_call(), add_call(), "done"])
    stepper = wf.stepper("go")
    stepper.break_error_box.value = True  # the checkbox and the trait are one
    assert stepper.break_on_error
    await click(stepper.run_button, stepper)
    assert stepper.status == "paused" and stepper.breakpoint_hit == 1
    assert stepper.position == 1 and stepper.turn_count == 2
    assert "breakpoint</b>: failed tool call (fail)" in stepper.turn_html.value
    assert "breakpoint</b> at turn 1" in stepper.header.value
    await click(stepper.run_button, stepper)
    assert stepper.status == "finished" and stepper.breakpoint_hit is None


async def test_break_on_rescued_call() -> None:
    wf, _ = looped([add_call(), RESCUED, "done"])
    stepper = wf.stepper("go")
    stepper.break_on_rescued = True
    assert stepper.break_rescued_box.value
    await stepper.run()
    assert stepper.breakpoint_hit == 1
    assert "rescued" in stepper.turn_html.value


async def test_break_when_a_condition_holds() -> None:
    wf, _ = looped([add_call(), add_call(), add_call(), add_call(), "done"])
    stepper = wf.stepper("go")
    stepper.break_when(lambda ctx: ctx.loop_tool_calls >= 3)
    await stepper.run()
    assert stepper.breakpoint_hit == 2
    assert "condition" in stepper.turn_html.value


async def test_break_when_an_until_helper_holds_in_step_iteration() -> None:
    wf, _ = looped([add_call(), add_call(), add_call(), "done"])
    stepper = wf.stepper("go")
    stepper.break_when(max_tool_calls(1))
    await stepper.step_iteration()
    assert stepper.breakpoint_hit == 0


async def test_break_expression_typed_in_the_box() -> None:
    wf, _ = looped([add_call(1, 1), add_call(2, 5), add_call(), "done"])
    stepper = wf.stepper("go")
    stepper.break_text.value = "turn.tool_calls and turn.tool_calls[0].result == '7'"
    assert stepper.break_expression.startswith("turn.tool_calls")
    await stepper.run()
    assert stepper.breakpoint_hit == 1


async def test_a_break_expression_that_raises_pauses_and_says_why() -> None:
    wf, _ = looped([add_call(), "done"])
    stepper = wf.stepper("go")
    stepper.break_when("ctx.no_such_thing")
    await stepper.run()
    assert stepper.breakpoint_hit == 0 and stepper.status == "paused"
    assert "AttributeError" in stepper.turn_html.value


async def test_scrubbing_shows_recorded_turns_without_running_anything() -> None:
    wf, model = looped([add_call(1, 1), add_call(2, 2), add_call(3, 3), "done"])
    stepper = wf.stepper("go")
    await stepper.run()
    calls = len(model.requests)
    assert stepper.position == 3
    stepper.back_button.click()
    assert stepper.position == 2 and stepper.slider.value == 2
    assert "{&quot;a&quot;: 3, &quot;b&quot;: 3}" in stepper.turn_html.value
    assert frame_rows(stepper) == 4  # every turn: the table lists what the chart draws
    assert '<tr class="current" data-turn="2">' in stepper.frame_html.value
    stepper.slider.value = 0
    assert stepper.position == 0 and "turn #0 (1st of 4)" in stepper.position_html.value
    assert '<tr class="current" data-turn="0">' in stepper.frame_html.value
    assert stepper.back_button.disabled
    stepper.back()
    assert stepper.position == 0
    stepper.forward_button.click()
    assert stepper.position == 1
    stepper.show(99)
    assert stepper.position == 3 and stepper.forward_button.disabled
    assert len(model.requests) == calls and stepper.task is not None and stepper.task.done()


async def test_frame_shows_at_most_frame_rows() -> None:
    wf, _ = looped([add_call()] * 30 + ["done"], max_iterations=40)
    stepper = wf.stepper("go")
    await stepper.run()
    assert frame_rows(stepper) == FRAME_ROWS
    assert "turns #11–#30 (of 31)" in stepper.frame_html.value
    stepper.show(4)  # a window around the shown turn, still FRAME_ROWS long
    assert frame_rows(stepper) == FRAME_ROWS
    assert "turns #0–#19 (of 31)" in stepper.frame_html.value
    stepper.show(15)
    assert "turns #5–#24 (of 31)" in stepper.frame_html.value


async def test_stop_while_paused() -> None:
    wf, model = looped([add_call()] * 5)
    stepper = wf.stepper("go")
    await stepper.step()
    task = stepper.stop()
    assert task is not None
    await task
    assert stepper.status == "stopped" and stepper.session.done
    assert len(model.requests) == 1
    assert stepper.stop_button.disabled and stepper.step_button.disabled


async def test_stop_before_start() -> None:
    wf, model = looped(["x"])
    stepper = wf.stepper("go")
    stepper.stop_button.click()
    assert stepper.status == "stopped" and model.requests == []


async def test_stop_while_running_cancels_the_model_call_in_flight() -> None:
    model = HeldModel([ADD] * 10, hold_at=2)
    agent = Agent("A", model=model, tools=[add])
    stepper = Workflow("w", [loop(steps=[agent], until=until_answered)]).stepper("go")
    task = stepper.run()
    await asyncio.wait_for(model.held.wait(), 10)  # the second model call is under way
    assert stepper.status == "running"
    assert stepper.stop() is task
    await asyncio.wait_for(task, 10)
    assert stepper.status == "stopped" and stepper.turn_count == 1
    assert model.calls == 2


async def test_a_second_click_while_a_turn_runs_is_ignored() -> None:
    model = ScriptedModel([ADD, ADD, "done"], delay=0.05)
    agent = Agent("A", model=model, tools=[add])
    stepper = Workflow("w", [loop(steps=[agent], until=until_answered)]).stepper("go")
    stepper.step_button.click()
    first = stepper.task
    assert stepper.step_button.disabled and not stepper.stop_button.disabled
    stepper.step_button.click()
    stepper.run_button.click()
    assert stepper.step() is first and stepper.task is first
    await first
    await asyncio.sleep(0.1)
    assert stepper.turn_count == 1 and len(model.requests) == 1
    assert not stepper.step_button.disabled


async def test_a_click_from_another_thread_runs_on_the_steppers_loop() -> None:
    """A front end may send clicks on a kernel subshell: another thread, another loop."""
    wf, _ = looped([add_call(), add_call(), "done"])
    stepper = wf.stepper("go")
    await asyncio.to_thread(stepper.step_button.click)
    for _ in range(100):
        if stepper.task is not None:
            break
        await asyncio.sleep(0.01)
    assert stepper.task is not None
    await stepper.task
    assert stepper.turn_count == 1

    def from_another_loop() -> Any:
        async def go() -> Any:
            return await stepper.step()

        return asyncio.run(go())

    turn = await asyncio.to_thread(from_another_loop)
    assert turn.index == 1 and stepper.turn_count == 2


async def test_stop_during_step_iteration_cancels_the_model_call_in_flight() -> None:
    model = HeldModel([ADD] * 3, hold_at=1)  # the first call waits until it is cancelled
    worker = Agent("Worker", model=model, tools=[add])
    checker = Agent("Checker", model=ScriptedModel(["again"] * 3))
    wf = Workflow("w", [loop(steps=[worker, checker], until=until_text("stop"))])
    stepper = wf.stepper("go")
    task = stepper.step_iteration()
    await asyncio.wait_for(model.held.wait(), 10)
    stepper.stop_button.click()
    await asyncio.wait_for(task, 10)
    assert stepper.status == "stopped" and stepper.turn_count == 0
    assert model.calls == 1


async def test_a_model_error_shows_and_the_stepper_stays_usable() -> None:
    model = ScriptedModel([ADD, reply.error(ModelError("overloaded <b>", model_name="m"))])
    agent = Agent("A", model=model, tools=[add])
    stepper = Workflow("w", [loop(steps=[agent], until=until_answered)]).stepper("go")
    await stepper.step()
    assert await stepper.step() is None
    assert stepper.status == "failed"
    assert "ModelError: overloaded &lt;b&gt;" in stepper.error_html.value
    assert "<b>" not in stepper.error_html.value
    stepper.show(0)
    assert "<code>add</code>" in stepper.turn_html.value
    assert await stepper.run() is not None and stepper.turn_count == 1


async def test_an_until_that_raises_is_shown_for_the_turn() -> None:
    def broken(ctx: Any) -> bool:
        raise RuntimeError("bad until")

    wf = Workflow("w", [loop(steps=[calc([add_call(), "x"])], until=broken)])
    stepper = wf.stepper("go")
    await stepper.step()
    assert "would stop" in stepper.turn_html.value
    assert "RuntimeError: bad until" in stepper.turn_html.value
    await stepper.step()  # the executor's own `until` check raises now: the run fails
    assert stepper.status == "failed" and "bad until" in stepper.error_html.value


async def test_model_text_is_escaped_everywhere() -> None:
    wf, _ = looped([reply.calls([("add", {"a": 1, "b": 2})], text=HOSTILE), HOSTILE])
    stepper = wf.stepper("go")
    await stepper.run()
    for value in (stepper.turn_html.value, stepper.frame_html.value):
        assert "<script" not in value and "<img" not in value
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in stepper.turn_html.value
    assert "&lt;img src=x onerror=alert(1)&gt; &amp; done" in stepper.turn_html.value
    assert "&lt;script&gt;" in stepper.frame_html.value
    stepper.show(0)
    assert "<script" not in stepper.turn_html.value


async def test_a_tool_result_is_escaped() -> None:
    from thena_nb import tool

    @tool
    def shout() -> str:
        """Return markup."""
        return "<script>alert(2)</script>"

    agent = Agent("A", model=ScriptedModel([reply.tool("shout"), "ok"]), tools=[shout])
    stepper = Workflow("w", [loop(steps=[agent], until=until_answered)]).stepper("go")
    await stepper.step()
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in stepper.turn_html.value
    assert "<script" not in stepper.turn_html.value


async def test_live_text_while_the_model_streams() -> None:
    release = asyncio.Event()

    async def streaming(request: ModelRequest) -> Any:
        assert request.on_text_delta is not None
        request.on_text_delta("Hello, ")
        request.on_text_delta("<b>world</b>")
        await release.wait()
        return "Hello, <b>world</b>"

    agent = Agent("Streamer", model=FunctionModel(streaming))
    stepper = Workflow("w", [agent]).stepper("go")
    task = stepper.step()
    for _ in range(50):
        await asyncio.sleep(0.01)
        if stepper.live_text.value:
            break
    assert stepper.live_text.value == "Hello, <b>world</b>"  # a Textarea shows text as text
    assert "Streamer" in stepper.live_label.value and stepper.status == "running"
    release.set()
    await task
    assert stepper.status == "finished" and stepper.turn_count == 1


def answers(what_if: dict[str, Any]) -> dict[str, tuple[int | None, str | None]]:
    return {key: (a.iteration, a.stop_reason) for key, a in what_if.items()}


async def test_what_if_on_the_recorded_run() -> None:
    wf, model = looped([add_call(), add_call(), add_call(), "all done"])
    stepper = wf.stepper("go")
    await stepper.run()
    calls = len(model.requests)
    assert answers(stepper.what_if("max_tool_calls(2)")) == {"w/0.loop": (2, "until")}
    assert "would have stopped after iteration <b>2</b>" in stepper.what_if_html.value
    assert answers(stepper.what_if("until_text('all done')")) == {"w/0.loop": (4, "until")}
    assert answers(stepper.what_if(until_text("never"))) == {"w/0.loop": (None, None)}
    assert "would not have stopped in the 4 recorded iterations" in stepper.what_if_html.value
    assert answers(stepper.what_if(lambda ctx: ctx.iteration == 3)) == {"w/0.loop": (3, "until")}
    assert len(model.requests) == calls


async def test_what_if_over_an_exhausted_loop_says_it_would_still_run_out() -> None:
    wf, _ = looped([add_call(), add_call(), add_call()], max_iterations=3)
    stepper = wf.stepper("go")
    await stepper.run()
    assert answers(stepper.what_if(until_text("never"))) == {"w/0.loop": (3, "exhausted")}
    assert "would still have run out of iterations after <b>3</b>" in stepper.what_if_html.value


async def test_what_if_typed_in_the_box_and_its_errors() -> None:
    wf, _ = looped([add_call(), "done"])
    stepper = wf.stepper("go")
    await stepper.run()
    stepper.what_if_text.value = "max_tool_calls(1)"
    stepper.what_if_button.click()
    assert "would have stopped after iteration <b>1</b>" in stepper.what_if_html.value
    stepper.what_if_text.value = "max_tool_calls(<"
    stepper.what_if_button.click()
    assert "SyntaxError" in stepper.what_if_html.value
    with pytest.raises(NameError):
        stepper.what_if("until_answerd")
    assert "NameError" in stepper.what_if_html.value
    with pytest.raises(TypeError):
        stepper.what_if("3")


async def test_what_if_over_nested_loops_and_state() -> None:
    """The what-if answers key a nested loop's runs `path`, `path#2`, ..."""
    inner = calc([add_call(), "inner done", add_call(), add_call(), "inner done"], name="Inner")
    outer = Agent("Outer", model=ScriptedModel(["again", "stop"]))
    wf = Workflow(
        "w",
        [
            loop(
                steps=[loop(steps=[inner], until=until_answered), outer],
                until=until_text("stop"),
            )
        ],
    )
    run = await wf.arun("go")
    assert answers(run.what_if(max_tool_calls(2))) == {
        "w/0.loop": (2, "until"),
        "w/0.loop/0.loop": (None, None),
        "w/0.loop/0.loop#2": (2, "until"),
    }
    seen: list[Any] = []
    run.what_if(lambda ctx, state=None: seen.append((ctx.iteration, state)))
    assert (1, None) in seen


async def test_state_traits_let_a_late_view_catch_up() -> None:
    wf, _ = looped([fail_call(), "done"])
    stepper = wf.stepper("go")
    stepper.break_on_error = True
    await stepper.run()
    stepper.flush()
    state = stepper.get_state()
    assert state["position"] == 0 and state["turn_count"] == 1
    assert state["status"] == "paused" and state["breakpoint_hit"] == 0
    assert state["break_on_error"] is True
    assert state["s_turn_html"] == stepper.turn_html.value and "failed" in state["s_turn_html"]
    assert state["parts"]["break_error_box"]["value"] is True


async def test_close_stops_listening() -> None:
    wf, _ = looped([add_call(), "done"])
    stepper = wf.stepper("go")
    session = stepper.session
    stepper.close()
    assert session.breakpoints == [] and session._control.subscribers == []
    assert stepper.comm is None
    await session.run()
    assert session.done


async def test_repr_names_the_workflow() -> None:
    wf, _ = looped(["done"])
    stepper = wf.stepper("go")
    assert re.fullmatch(r"Stepper\('w', new, turns=0, position=-1\)", repr(stepper))


async def test_the_mime_bundle_carries_an_html_snapshot_of_what_the_stepper_shows() -> None:
    wf, _ = looped([add_call(1, 2), HOSTILE])
    stepper = wf.stepper("go")
    stepper.chart_delay = 0
    assert "no turns yet" in stepper._repr_mimebundle_()[0]["text/html"]
    await click(stepper.run_button, stepper)
    await chart_svg(stepper)
    bundle, _ = stepper._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    snapshot = bundle["text/html"]
    assert snapshot.startswith('<div class="thena-stepper-snapshot thena-ui">')
    assert stepper.header.value in snapshot and stepper.turn_html.value in snapshot
    assert "&lt;script&gt;window.__pwned" in snapshot and "<script" not in snapshot
    assert "<button" not in snapshot and '<svg xmlns="http://www.w3.org/2000/svg"' in snapshot


class _Loud(int):
    """A whole number that prints as markup (a hostile `max_iterations`)."""

    def __str__(self) -> str:
        return "<img src=x onerror=alert(1)>"

    __repr__ = __str__

    def __format__(self, spec: str) -> str:
        return str(self)


async def test_loop_limits_in_the_position_line_are_escaped() -> None:
    from thena_nb.notebook import _stepper_views as views

    wf, _ = looped([add_call(), "done"], max_iterations=_Loud(5), max_fails=_Loud(3))
    stepper = wf.stepper("go")
    turn = await click(stepper.step_button, stepper)
    assert "<img" not in stepper.position_html.value  # the session hands plain numbers on
    assert (
        "ran in loop iteration 1 of 5 · consecutive fails after it 0 of 3"
        in stepper.position_html.value
    )
    assert "· 1 turn</div>" in stepper.header.value
    line = views.position_html(turn, 1, limits=(_Loud(5), _Loud(3.0)), tokens=_Loud(0))
    assert "<img" not in line and line.count("&lt;img src=x onerror=alert(1)&gt;") == 2
