"""The Stepper as a debugger: the transcript and inspector, branch stepping, a live header,
pause/continue, stopping, gate cards, edit and continue, break-when as you type, what-if on
the chart. Every control is driven through the widget's public methods and traits."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from helpers import HeldModel, add, add_call, calc, fail_call

from thena_nb import Agent, Workflow, loop, parallel, tool, until_answered
from thena_nb.core.records.decisions import Decision
from thena_nb.models import ScriptedModel, reply

pytestmark = pytest.mark.anyio

HOSTILE = "<script>window.__pwned = 1</script><img src=x onerror=alert(1)>"


def branched() -> tuple[Workflow, list[ScriptedModel]]:
    """Planner, then a parallel block of a looped Researcher (2 turns) and a Critic."""
    models = [
        ScriptedModel(["plan"]),
        ScriptedModel([add_call(1, 2), "found"]),
        ScriptedModel(["critique"]),
        ScriptedModel(["summary"]),
    ]
    researcher = Agent("Researcher", model=models[1], tools=[add])
    block = parallel(
        [
            loop(steps=[researcher], until=until_answered, max_iterations=4),
            Agent("Critic", model=models[2]),
        ]
    )
    steps = [Agent("Planner", model=models[0]), block, Agent("Writer", model=models[3])]
    return Workflow("research", steps), models


def _pay(amount: int) -> str:
    return f"paid {amount}"


def gated(*replies: Any) -> tuple[Workflow, ScriptedModel]:
    """A clerk whose `pay(amount: int)` tool is gated."""
    model = ScriptedModel(list(replies))
    pay = tool(_pay, name="pay", gate=True)
    return Workflow("pay", [Agent("Clerk", model=model, tools=[pay])]), model


async def test_step_in_a_parallel_block_runs_one_branch_turn_and_shows_its_branch() -> None:
    wf, models = branched()
    stepper = wf.stepper("go")
    await stepper.step()  # Planner
    turn = await stepper.step()  # branch 0, the Researcher's first turn
    assert turn.branch == 0 and stepper.turn_count == 1
    assert sum(len(m.requests) for m in models) == 2
    assert "branch 0" in stepper.position_html.value
    assert "(+1 in a parallel block)" in stepper.header.value
    assert "joins the run when the block ends" in stepper.transcript_html.value
    second = await stepper.step()
    assert second.branch == 0 and second.agent == "Researcher"
    third = await stepper.step()
    assert third.branch == 1 and third.agent == "Critic"
    assert "branch 1" in stepper.position_html.value
    assert stepper.position == 3
    await stepper.step()  # the Writer; the block has merged
    assert stepper.turn_count == 5 and "parallel block)" not in stepper.header.value
    assert [t.agent for t in stepper.session.result.turns] == [
        "Planner",
        "Researcher",
        "Researcher",
        "Critic",
        "Writer",
    ]


async def test_the_header_names_the_input_and_every_open_loop_against_its_limits() -> None:
    inner = loop(steps=[calc([add_call()] * 6 + ["done"])], until=until_answered, max_iterations=3)
    outer = loop(steps=[inner], until=until_answered, max_iterations=2, max_fails=4)
    stepper = Workflow("nest", [outer]).stepper("what is <b>1</b>?")
    await stepper.step()
    header = stepper.header.value
    assert "input: what is &lt;b&gt;1&lt;/b&gt;?" in header
    assert (
        "loop <code>nest/0.loop</code>: now at iteration 1 of 2 · consecutive fails 0 of 4"
        in header
    )
    # paused before the next model call, which is the inner loop's second iteration
    assert "↳ loop <code>nest/0.loop/0.loop</code>: now at iteration 2 of 3" in header
    await stepper.step()
    await stepper.step()
    await stepper.step()  # the inner loop ran out: a second outer iteration began
    header = stepper.header.value
    assert "iteration 2 of 2" in header
    assert 'stopped: <span class="thena-badge r-exhausted">exhausted</span>' in header


async def test_the_header_says_who_is_answering_while_the_model_call_runs() -> None:
    model = HeldModel(["hello"], hold_at=1)  # answers once the test releases it
    stepper = Workflow("w", [Agent("Planner", model=model)]).stepper("go")
    task = stepper.step()
    await asyncio.wait_for(model.held.wait(), 10)
    assert stepper.live == "Planner is answering…" and stepper.status == "running"
    assert "<b>Planner</b> is answering…" in stepper.header.value
    assert "running" in stepper.header.value
    model.release.set()
    await asyncio.wait_for(task, 10)
    assert stepper.live == "" and "is answering" not in stepper.header.value
    assert stepper.status == "finished" and "1 turn" in stepper.header.value


async def test_pause_then_continue_a_run() -> None:
    wf = Workflow("w", [loop(steps=[calc([add_call()] * 5 + ["done"])], until=until_answered)])
    stepper = wf.stepper("go")
    stepper.session.subscribe(
        lambda e: stepper.pause() if e.kind == "turn_finished" and e.turn.index == 1 else None
    )
    assert stepper.pause_button.disabled
    task = stepper.run()
    assert not stepper.pause_button.disabled
    await task
    assert stepper.status == "paused" and stepper.turn_count == 2
    assert not stepper.continue_button.disabled
    stepper.continue_button.click()
    assert stepper.task is not None
    await stepper.task
    assert stepper.status == "finished" and stepper.turn_count == 6


async def test_stop_says_stopping_until_the_call_in_flight_is_cancelled() -> None:
    model = HeldModel(["slow"], hold_at=1)  # the call waits until it is cancelled
    stepper = Workflow("w", [Agent("A", model=model)]).stepper("go")
    task = stepper.run()
    await asyncio.wait_for(model.held.wait(), 10)
    stepper.stop_button.click()
    assert stepper.status == "stopping" and "stopping…" in stepper.header.value
    await asyncio.wait_for(task, 10)
    assert stepper.status == "stopped" and "stopping" not in stepper.header.value


async def test_pause_before_every_tool_call_gives_a_card_and_approve_runs_it() -> None:
    wf = Workflow("w", [loop(steps=[calc([add_call(2, 3), "done"])], until=until_answered)])
    stepper = wf.stepper("go")
    stepper.gate_box.value = True
    assert stepper.gate_every_call and len(stepper.session.gates) == 1
    await stepper.run()
    held = stepper.session.pending[0].call.id
    assert stepper.pending_count == 1 and list(stepper.gate_cards) == [held]
    assert "1 tool call waits for a decision" in stepper.header.value
    assert stepper.run_button.disabled and stepper.step_button.disabled
    card = stepper.gate_cards[held]
    assert '"a": 2' in card.editor.value and "add" in card.head.value
    card.approve_button.click()
    assert stepper.task is not None
    await stepper.task  # the run goes on by itself once nothing is pending
    run = stepper.session.result
    assert (
        run.turns[0].tool_calls[0].result == "5"
        and run.turns[0].tool_calls[0].decision == "approve"
    )
    stepper.gate_every_call = False
    assert stepper.session.gates == []


async def test_an_edit_that_is_not_json_or_misfits_the_schema_shows_inline() -> None:
    wf, _ = gated(reply.tool("pay", amount=500), "Done.")
    stepper = wf.stepper("pay 500")
    await stepper.step()
    (card,) = stepper.gate_cards.values()
    assert not card.edit("{amount: 5")
    assert "not JSON" in card.error.value and stepper.pending_count == 1
    assert not card.edit('{"amount": "<b>lots</b>"}')
    assert "do not fit tool" in card.error.value and "amount must be an integer" in card.error.value
    assert "<b>" not in card.error.value
    assert card.edit({"amount": 50})
    await stepper.task
    call = stepper.session.result.turns[0].tool_calls[0]
    assert call.result == "paid 50" and call.original_arguments == {"amount": 500}


async def test_reject_with_a_reason_and_respond_instead_of_running() -> None:
    calls = reply.calls([("pay", {"amount": 1}), ("pay", {"amount": 2})])
    wf, _ = gated(calls, "Done.")
    stepper = wf.stepper("pay twice")
    await stepper.step()
    stepper.flush()
    assert [card["id"] for card in stepper.gates] == [c.call.id for c in stepper.session.pending]
    assert len(stepper.gates) == 2
    first, second = stepper.gate_cards.values()
    assert first.reject("too <much>")
    assert stepper.pending_count == 1 and stepper.task is not None and stepper.task.done()
    assert second.respond("paid by hand")
    await stepper.task
    turn = stepper.session.result.turns[0]
    assert [c.decision for c in turn.tool_calls] == ["reject", "respond"]
    assert "too <much>" in (turn.tool_calls[0].error or "")
    assert turn.tool_calls[1].result == "paid by hand"
    stepper.flush()
    assert stepper.gates == []


async def test_decide_by_method_as_well() -> None:
    wf, _ = gated(reply.tool("pay", amount=5), "Done.")
    stepper = wf.stepper("pay")
    await stepper.step()
    stepper.decide(stepper.session.pending[0].call.id, Decision.respond("no"))
    await stepper.task
    assert stepper.session.result.turns[0].tool_calls[0].result == "no"


async def test_edit_a_reply_and_continue_follows_the_fork_and_goes_back() -> None:
    wf = Workflow("w", [loop(steps=[calc([add_call(), add_call(), "done"])], until=until_answered)])
    stepper = wf.stepper("go")
    await stepper.run()
    parent = stepper.session.result
    stepper.show(1)
    assert stepper.edit_target.value == "reply"
    stepper.edit_text.value = "Enough: <it is 2>."
    stepper.edit_button.click()
    assert stepper.task is not None
    await stepper.task
    fork = stepper.session.result
    assert fork is not parent and fork.parent_run_id == parent.run_id and fork.forked_at == 1
    assert stepper.run_id == fork.run_id and stepper.position == 1
    assert [t.replayed for t in fork.turns] == [True, False]
    assert "Enough: &lt;it is 2&gt;." in stepper.transcript_html.value
    assert "a fork of run" in stepper.fork_html.value
    assert not stepper.parent_button.hidden
    stepper.command({"part": "parent_button", "do": "click"})
    assert stepper.session.result is parent and stepper.turn_count == 3
    assert stepper.parent_button.hidden


async def test_edit_a_tool_result_and_continue() -> None:
    wf = Workflow("w", [loop(steps=[calc([add_call(), "done", "again"])], until=until_answered)])
    stepper = wf.stepper("go")
    await stepper.run()
    stepper.show(0)
    call_id = stepper.session.result.turns[0].tool_calls[0].id
    stepper.edit_target.value = call_id
    assert stepper.edit_text.value == "2"
    await stepper.edit_turn(0, tool_results={call_id: "3"})
    fork = stepper.session.result
    assert (
        fork.turns[0].tool_calls[0].result == "3"
        and fork.turns[0].tool_calls[0].decision == "respond"
    )
    await stepper.run()
    assert stepper.session.result.output == "done"


async def test_an_edit_that_does_not_fit_says_why() -> None:
    wf = Workflow("w", [calc(["x"])])
    stepper = wf.stepper("go")
    await stepper.run()
    with pytest.raises(ValueError, match="no tool call"):
        stepper.edit_turn(0, tool_results={"nope": "1"})
    assert "no tool call" in stepper.edit_error.value


async def test_break_when_is_compiled_as_it_is_typed() -> None:
    wf = Workflow("w", [loop(steps=[calc([add_call(), "done"])], until=until_answered)])
    stepper = wf.stepper("go")
    stepper.break_text.value = "turn.info.tool_name =="
    assert "invalid syntax" in stepper.break_error or "expected" in stepper.break_error
    assert stepper.break_error_html.value and stepper.session.result.turns == []
    stepper.break_text.value = "turn.info.tool_name == 'add'"
    assert stepper.break_error == "" and stepper.break_error_html.value == ""
    await stepper.run()
    assert stepper.breakpoint_hit == 0


async def test_enter_in_the_what_if_box_runs_it_and_the_chart_draws_it() -> None:
    wf = Workflow("w", [loop(steps=[calc([add_call()] * 4 + ["done"])], until=until_answered)])
    stepper = wf.stepper("go")
    stepper.chart_delay = 0
    await stepper.run()
    stepper.what_if_text.value = "max_tool_calls(2)"  # sent on Enter (continuous_update off)
    assert "would have stopped after iteration <b>2</b>" in stepper.what_if_html.value
    assert stepper.chart_task is not None
    await stepper.chart_task
    assert 'class="what-if"' in stepper.chart.value
    assert "what if: stops after iteration 2" in stepper.chart.value
    assert 'class="current"' in stepper.chart.value


async def test_the_inspector_shows_what_the_model_saw_its_reasoning_and_tools() -> None:
    agent = calc(
        ["<think>add them first</think>" + '{"name": "fail", "arguments": {}}', "done"],
        system="You add <numbers>.",
    )
    wf = Workflow("w", [loop(steps=[agent], until=until_answered)])
    stepper = wf.stepper("go")
    await stepper.run()
    stepper.show(0)
    stepper.inspector.selected_index = 1
    saw = stepper.saw_html.value
    assert "System prompt" in saw and "You add &lt;numbers&gt;." in saw
    assert "<code>add</code>" in saw and "<code>fail</code>" in saw
    assert "Messages as sent (1)" in saw and "wire payload" in saw
    stepper.inspector.selected_index = 2
    assert "add them first" in stepper.reasoning_html.value
    stepper.inspector.selected_index = 3
    tools = stepper.tools_html.value
    assert "ValueError" in tools and "<details class='thena-traceback'>" in tools
    assert "b-rescued" in tools and "b-failed" in tools


async def test_the_transcript_has_the_user_the_replies_and_the_calls_with_badges() -> None:
    wf = Workflow(
        "w", [loop(steps=[calc([add_call(), fail_call(), HOSTILE])], until=until_answered)]
    )
    stepper = wf.stepper("what <now>?")
    await stepper.run()
    text = stepper.transcript_html.value
    assert "what &lt;now&gt;?" in text and text.count('class="thena-entry turn') == 3
    assert "b-native" in text and "b-ok" in text and "b-failed" in text
    assert "&lt;script&gt;window.__pwned" in text and "<script" not in text
    assert 'class="thena-entry turn current"' in text


async def test_the_turn_table_has_few_aligned_columns() -> None:
    wf = Workflow("w", [loop(steps=[calc([add_call(), "x" * 300])], until=until_answered)])
    stepper = wf.stepper("go")
    await stepper.run()
    table = stepper.frame_html.value
    head = table.split("<thead>")[1].split("</thead>")[0]
    assert head.count("<th") == 6 and '<th class="num">turn #</th>' in head
    assert "<details><summary>" in table and "x" * 300 in table


async def test_the_stepper_carries_the_stylesheet_with_theme_variables() -> None:
    stepper = Workflow("w", [calc(["x"])]).stepper("go")
    assert "var(--jp-ui-font-color1" in stepper._css
    assert "var(--jp-layout-color1" in stepper._css
    assert 'root = el("div", "thena-ui thena-stepper")' in stepper._esm


def test_a_run_page_has_every_turn_one_script_and_no_model_markup(tmp_path: Any) -> None:
    wf = Workflow("w", [loop(steps=[calc([add_call(), HOSTILE])], until=until_answered)])
    run = wf.run("go", store=False)
    path = run.to_html(tmp_path / "run.html")
    page = path.read_text()
    assert page.count("<script") == 1 and "window.__pwned" in page
    assert "<img src=x" not in page and "&lt;img src=x" in page
    assert page.count('class="thena-turn-view"') == 2
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page and "<svg" in page


def test_a_run_page_refuses_a_directory(tmp_path: Any) -> None:
    run = Workflow("w", [calc(["x"])]).run("go", store=False)
    with pytest.raises(ValueError, match="is a directory"):
        run.to_html(tmp_path)


def test_json_of_the_wire_payload_is_in_the_page(tmp_path: Any) -> None:
    run = Workflow("w", [calc(["x"], system="Sys")]).run("go", store=False)
    page = run.to_html(tmp_path / "p.html").read_text()
    wire = json.dumps(run.wire_request_of(0), indent=2)
    assert "wire payload" in page and "&quot;system&quot;: &quot;Sys&quot;" in page
    assert wire.splitlines()[0] == "{"
