"""The Stepper over a recorded run (view mode): a run stored in a real SQLite file, read back
with `Run.load`, scrubbed and inspected; "Fork from here" into a live session; a run of a
pydantic-ai agent; a run read from JSON; a run with no turns."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import add, add_call

from thena_nb import Agent, Run, Workflow, loop, stepper, until_answered
from thena_nb.core.engine.gates import GateError
from thena_nb.models import ScriptedModel
from thena_nb.notebook import Stepper
from thena_nb.notebook._stepper_run import RecordedSession
from thena_nb.notebook._stepper_views import FORK_NEEDS_WORKFLOW
from thena_nb.notebook._widget_parts import Part
from thena_nb.store import SqliteRunStore

pytestmark = pytest.mark.anyio

HOSTILE = "<script>window.__pwned = 1</script><img src=x onerror=alert(1)> & the sum is 7"
RAW = re.compile(r"<script|<img", re.IGNORECASE)


def sums(replies: list[Any]) -> Workflow:
    """The workflow every test records: one agent with `add`, looped until it answers."""
    agent = Agent("Calc", model=ScriptedModel(replies), tools=[add], system="Add <carefully>.")
    return Workflow("sums", [loop(steps=[agent], until=until_answered, max_iterations=5)])


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteRunStore]:
    with SqliteRunStore.from_path(tmp_path / "runs.sqlite3") as opened:
        yield opened


def stored(tmp_path: Path, wf: Workflow, input: str = "add 1+2, then 3+4") -> Run:
    """Run `wf` into a SQLite file, close it, and load the run back from a new connection."""
    path = tmp_path / "recorded.sqlite3"
    with SqliteRunStore.from_path(path) as writing:
        run_id = wf.run(input, store=writing).run_id
    with SqliteRunStore.from_path(path) as reading:
        return Run.load(run_id, store=reading)


def all_html(s: Stepper) -> str:
    """Every HTML view the Stepper holds now."""
    parts = [
        s.header.value,
        s.view_html.value,
        s.position_html.value,
        s.transcript_html.value,
        s.turn_html.value,
        s.saw_html.value,
        s.reasoning_html.value,
        s.tools_html.value,
        s.frame_html.value,
        s.what_if_html.value,
    ]
    return "".join(parts)


def hidden(part: Part) -> bool:
    return part.hidden


async def test_a_stored_run_opens_in_view_mode_and_scrubs_to_its_last_turn(
    tmp_path: Path,
) -> None:
    run = stored(tmp_path, sums([add_call(1, 2), add_call(3, 4), HOSTILE]))
    assert run.workflow is None and len(run.turns) == 3

    s = stepper(run)
    s.chart_delay = 0
    assert isinstance(s, Stepper) and isinstance(s.session, RecordedSession)
    assert (s.mode, s.status, s.turn_count, s.position) == ("view", "finished", 3, 0)
    assert s.run_id == run.run_id
    assert "viewing a finished run (3 turns)" in s.view_html.value
    assert all(hidden(w) for w in (s.controls, s.breaks)) and not hidden(s.view_bar)
    assert s.gates == []

    s.slider.value = 2  # scrub, as dragging the slider does
    assert s.position == 2
    assert "turn #2 (3rd of 3)" in s.position_html.value
    assert "loop iteration 3 of 5" in s.position_html.value  # limits from the stored report
    card = s.turn_html.value
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in card
    assert "&amp; the sum is 7" in card

    s.back()
    assert s.position == 1
    s.inspector.selected_index = 3  # Tools
    tools = s.tools_html.value
    assert "<code>add</code>" in tools and "&quot;a&quot;: 3" in tools and ">7</pre>" in tools

    s.forward()
    s.inspector.selected_index = 1  # What the model saw
    saw = s.saw_html.value
    assert "Add &lt;carefully&gt;." in saw  # the system prompt, escaped
    assert "Messages as sent (5)" in saw  # the input, two calls and their results
    assert "add 1+2, then 3+4" in saw

    assert s.frame_html.value.split("<tbody>", 1)[1].count("<tr") == 3
    assert s.chart_task is not None
    await s.chart_task
    assert str(s.chart.value).startswith('<div class="thena-chart"><svg')
    answers = s.what_if("max_tool_calls(1)")
    assert [a.iteration for a in answers.values()] == [1]
    assert "would have stopped after iteration <b>1</b>" in s.what_if_html.value

    assert not RAW.search(all_html(s))
    assert "<script" not in s.snapshot_html()
    assert repr(s) == (
        f"Stepper('sums', view of run {run.run_id!r}, finished, turns=3, position=2, "
        f"fork=needs workflow=)"
    )


async def test_without_a_workflow_fork_is_disabled_and_says_how_to_enable_it(
    tmp_path: Path,
) -> None:
    run = stored(tmp_path, sums([add_call(1, 2), "three"]))
    s = run.stepper()
    assert s.fork_button.disabled
    assert s.fork_button.tooltip == FORK_NEEDS_WORKFLOW
    assert "workflow=wf" in s.fork_button.tooltip
    assert "thena_nb.stepper(run, workflow=wf)" in s.view_html.value
    assert s.edit_button.disabled  # an edit forks too
    s.inspector.selected_index = 1
    assert "Messages as sent (1)" in s.saw_html.value
    assert "could not be rendered" in s.saw_html.value  # no model to render the wire with
    with pytest.raises(ValueError, match="has no workflow to fork it with"):
        s.fork_here()
    assert "has no workflow" in s.error_html.value
    assert (s.mode, s.run_id) == ("view", run.run_id)
    # The live controls do nothing here: there is nothing to run, stop or decide.
    assert await s.step() is None
    assert s.stop() is None
    with pytest.raises(GateError, match="views run"):
        s.decide("call_1_0", None)  # type: ignore[arg-type]
    assert (s.status, s.turn_count) == ("finished", 2)


async def test_fork_from_here_starts_a_live_session_whose_parent_is_the_viewed_run(
    tmp_path: Path, store: SqliteRunStore
) -> None:
    run = stored(tmp_path, sums([add_call(1, 2), add_call(3, 4), "ten"]))
    live = sums(["the sum is 7, said live"])  # its first model call is turn 2's
    s = stepper(run, workflow=live, store=store)
    assert not s.fork_button.disabled
    s.show(2)
    assert "turn 2 on runs live" in s.fork_button.tooltip
    s.inspector.selected_index = 1  # the wire payload renders with the given workflow's model
    assert "wire payload" in s.saw_html.value and "could not be rendered" not in s.saw_html.value

    s.fork_button.click()
    assert s.task is not None
    await s.task
    fork = s.session.result
    assert s.mode == "live" and not hidden(s.controls) and hidden(s.view_bar)
    assert (s.status, s.turn_count, s.run_id) == ("paused", 2, fork.run_id)
    assert (fork.parent_run_id, fork.forked_at) == (run.run_id, 2)
    assert fork.parent is run
    assert [t.replayed for t in fork.turns] == [True, True]
    assert "a fork of run" in s.fork_html.value and "live from turn 2" in s.fork_html.value
    assert not s.step_button.disabled

    done = await s.run()
    assert done is fork and s.status == "finished"
    assert fork.output == "the sum is 7, said live"
    assert [t.replayed for t in fork.turns] == [True, True, False]
    assert store.load(fork.run_id).parent_run_id == run.run_id  # kept where it was asked

    s.back_to_parent()
    assert (s.mode, s.run_id, s.turn_count) == ("view", run.run_id, 3)
    assert not hidden(s.view_bar)


async def test_a_run_with_no_turns_shows_that_and_forks_from_the_start(tmp_path: Path) -> None:
    def prepare(ctx: Any) -> None:
        """A function step: the run makes no model call."""

    run = stored(tmp_path, Workflow("setup", [prepare]))
    assert run.turns == [] and run.status == "finished"
    s = stepper(run, workflow=Workflow("setup", [prepare, Agent("A", model=ScriptedModel(["hi"]))]))
    assert (s.mode, s.turn_count, s.position) == ("view", 0, -1)
    assert s.slider.disabled and s.back_button.disabled and s.forward_button.disabled
    assert "this run has no turns" in s.position_html.value
    assert "viewing a finished run (0 turns)" in s.view_html.value
    assert "the whole run runs again live" in s.fork_button.tooltip

    await s.fork_here()
    assert (s.mode, s.status, s.turn_count) == ("live", "new", 0)
    fork = await s.run()
    assert fork.output == "hi" and fork.parent is run and fork.forked_at == 0


async def test_a_run_read_from_json_and_one_made_here_open_alike() -> None:
    made = sums([add_call(1, 2), "three"]).run("go", store=False)
    imported = Run.from_json(made.to_json())
    here, there = made.stepper(), stepper(imported)
    assert not here.fork_button.disabled  # the run knows its workflow
    assert there.fork_button.disabled  # a run read from JSON does not
    for s in (here, there):
        s.show(1)
        assert s.turn_count == 2 and "three" in s.turn_html.value
    assert repr(here).endswith("position=1, fork=available)")


async def test_a_pydantic_ai_agents_run_forks_with_the_agent_itself(tmp_path: Path) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent as PydanticAgent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    calls: list[str] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1].parts[-1]
        calls.append(last.part_kind)
        if last.part_kind == "user-prompt":
            return ModelResponse(parts=[ToolCallPart("get_weather", {"city": "Lisbon"})])
        return ModelResponse(parts=[TextPart(f"<b>Forecast</b>: {getattr(last, 'content', '')}")])

    agent = PydanticAgent(FunctionModel(answer), name="Forecaster")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"sunny in {city}"

    run = stored(tmp_path, Workflow.of(agent), input="Weather in Lisbon?")
    assert [t.agent for t in run.turns] == ["Forecaster", "Forecaster"]
    s = stepper(run, workflow=agent)
    s.show(1)
    assert "&lt;b&gt;Forecast&lt;/b&gt;: sunny in Lisbon" in s.turn_html.value
    s.show(0)
    s.inspector.selected_index = 3
    assert "get_weather" in s.tools_html.value

    calls.clear()
    s.show(1)
    await s.fork_here()
    assert (s.mode, s.turn_count) == ("live", 1)
    fork = await s.run()
    assert fork.status == "finished" and fork.output == "<b>Forecast</b>: sunny in Lisbon"
    assert fork.parent is run and [t.replayed for t in fork.turns] == [True, False]
    assert calls == ["tool-return"]  # the reused turn made no model call


async def test_a_live_stepper_stays_live() -> None:
    s = sums(["done"]).stepper("go")
    assert s.mode == "live" and hidden(s.view_bar) and not hidden(s.controls)
    assert repr(s) == "Stepper('sums', new, turns=0, position=-1)"
    with pytest.raises(TypeError, match="opens a `Run`"):
        stepper("not a run")  # type: ignore[arg-type]
