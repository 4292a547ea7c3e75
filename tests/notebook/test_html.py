"""HTML views of turns, workflows and runs: content, structure, and escaping everywhere."""

from __future__ import annotations

import math
import re

from nb_records import HOSTILE, build_loop, build_turn

from thena_nb.core.parts.agent import Agent
from thena_nb.core.parts.steps import loop, parallel
from thena_nb.core.parts.stopping import Condition, until_answered
from thena_nb.core.parts.tools import tool
from thena_nb.core.records import _html
from thena_nb.core.records.types import LoopFailure, ToolCall, TurnInfo
from thena_nb.core.runs.run import Run
from thena_nb.core.workflow import Workflow
from thena_nb.models import ScriptedModel, reply
from thena_nb.notebook.charts import failure_chart, figure_png_b64
from thena_nb.notebook.frames import frame_html, turn_frame

SCRIPT = "&lt;script&gt;alert(1)&lt;/script&gt;"
IMG = "&lt;img src=x onerror=alert(1)&gt;"


def assert_escaped(text: str, *, times: int = 1) -> None:
    """No live tag from `HOSTILE` survives; its escaped form is shown at least `times` times."""
    assert "<script" not in text.lower()
    assert "<img src=x" not in text
    assert re.search(r"<[^>]*onerror", text) is None
    assert text.count(SCRIPT) >= times
    assert text.count(IMG) >= times


@tool
def search(q: str) -> str:
    """Search the notes."""
    return HOSTILE


def hostile_turn() -> object:
    calls = [
        ToolCall(
            id="c1",
            name=HOSTILE,
            arguments={"q": HOSTILE},
            source="rescued",
            ok=True,
            result=HOSTILE,
        ),
        ToolCall(id="c2", name="search", arguments={}, ok=False, error=HOSTILE),
    ]
    refused = [ToolCall(id="c3", name="rm", arguments={"path": HOSTILE}, error=HOSTILE)]
    turn = build_turn(4, response=HOSTILE, finish_reason=HOSTILE, agent=HOSTILE, path=HOSTILE)
    return turn.model_copy(update={"tool_calls": calls, "refused_calls": refused})


def test_escape_handles_quotes_none_and_non_strings() -> None:
    assert _html.escape("<a href=\"x\" title='y'>&</a>") == (
        "&lt;a href=&quot;x&quot; title=&#x27;y&#x27;&gt;&amp;&lt;/a&gt;"
    )
    assert _html.escape(None) == ""
    assert _html.escape(3) == "3"


def test_turn_info_html_shows_every_field_escaped() -> None:
    info = TurnInfo(
        called_tool=True,
        tool_name=HOSTILE,
        tool_error=True,
        tool_call_source="rescued",
        response=HOSTILE,
    )
    text = _html.turn_info_html(info)
    assert_escaped(text, times=2)
    for field in ("called_tool", "tool_name", "tool_error", "tool_call_source", "response"):
        assert field in text
    assert "rescued" in text
    assert info._repr_html_() == text


def test_turn_html_shows_text_calls_arguments_outcomes_and_badges() -> None:
    turn = hostile_turn()
    text = _html.turn_html(turn)
    # response, agent, path, finish reason, call name, arguments, result, error, refused call
    assert_escaped(text, times=8)
    assert "turn 4" in text
    assert "rescued" in text and "native" in text
    assert ">ok<" in text and ">failed<" in text
    assert "not run" in text
    assert turn._repr_html_() == text  # type: ignore[attr-defined]


def test_turn_html_of_a_silent_text_turn() -> None:
    text = _html.turn_html(build_turn(0, iteration=2, branch=1, attempts=3))
    assert "(no text)" in text
    assert "iteration 2" in text
    assert "branch 1" in text
    assert "3 attempts" in text


def test_workflow_html_draws_the_step_tree() -> None:
    a = Agent("Security", model=ScriptedModel(["ok"], name="model-a"), tools=[search])
    b = Agent("Perf", model=ScriptedModel(["ok"]))
    executor = Agent("Executor", model=ScriptedModel(["ok"]))

    def prepare(ctx: object) -> None:
        return None

    def give_up(ctx: object, iterations: int) -> None:
        return None

    wf = Workflow(
        "review",
        [
            prepare,
            parallel([a, b]),
            loop(
                steps=[executor],
                until=until_answered,
                max_iterations=8,
                max_fails=math.inf,
                on_exhausted=give_up,
            ),
        ],
    )
    text = _html.workflow_html(wf)
    assert "review" in text
    assert "prepare(ctx)" in text
    assert 'class="thena-parallel"' in text
    assert "display:flex" in text  # branches side by side
    assert text.index("Security") < text.index("Perf")
    assert "model-a" in text and "search" in text
    assert "until <code>until_answered</code>" in text
    assert "max_iterations 8" in text
    assert "max_fails off" in text
    assert "on_exhausted <code>give_up</code>" in text
    assert wf._repr_html_() == text


def test_workflow_html_escapes_names_a_user_chose() -> None:
    model = ScriptedModel(["ok"], name=HOSTILE)
    until = Condition(lambda ctx: True, name=HOSTILE)
    wf = Workflow("wf", [loop(steps=[Agent("A", model=model)], until=until)])
    assert_escaped(_html.workflow_html(wf), times=2)


def hostile_run() -> Run:
    run = Run(workflow_name="wf", input=HOSTILE)
    run.output = HOSTILE
    run.status = "failed"
    run.error = HOSTILE
    run.turns = [build_turn(0, response=HOSTILE, source="native", failed=True, streak=1)]
    node = build_loop("wf/0.loop", [0], stop_reason=None, error=HOSTILE)
    node.failures = LoopFailure(consecutive=1, total=1, tool_name=HOSTILE, message=HOSTILE)
    run.report.children.append(node)
    return run


def test_run_html_shows_status_loops_usage_and_turns_escaped() -> None:
    run = hostile_run()
    text = _html.run_html(run)
    # output, error, failure tool name, failure message, turn response
    assert_escaped(text, times=5)
    assert "failed" in text
    assert "wf/0.loop" in text
    assert "model calls" in text
    assert "<table>" in text


def test_run_html_embeds_the_frame_and_chart_it_is_given() -> None:
    run = hostile_run()
    table = frame_html(turn_frame(run.turns))
    png = figure_png_b64(failure_chart(run.turns, run.loops))
    text = _html.run_html(run, frame_html=table, chart_png_b64=png)
    assert_escaped(text, times=5)
    assert table in text
    assert f"data:image/png;base64,{png}" in text


def test_a_real_run_with_hostile_model_text_renders_escaped() -> None:
    model = ScriptedModel([reply.tool("search", q=HOSTILE), HOSTILE])
    agent = Agent("Finder", model=model, tools=[search])
    run = Workflow("wf", [loop(steps=[agent], until=until_answered)]).run(HOSTILE)
    outputs = [
        run._repr_html_(),
        _html.run_html(run, frame_html=frame_html(run.frame())),
        *(_html.turn_html(t) for t in run.turns),
        _html.turn_info_html(run.turns[-1].info),
    ]
    for text in outputs:
        assert_escaped(text)


def _one_loop_run(script: list[object], *, max_fails: int = 5, name: str = "w") -> Run:
    @tool
    def lookup(q: str) -> str:
        """Look up."""
        raise RuntimeError("down")

    agent = Agent("A", model=ScriptedModel(script), tools=[lookup])
    steps = [loop(steps=[agent], until=until_answered, max_fails=max_fails)]
    return Workflow(name, steps).run("go", store=False)


def test_an_empty_answer_is_shown_as_empty_not_left_out() -> None:
    page = _html.run_html(_one_loop_run([""]))
    assert "(empty answer)" in page


def test_a_run_that_ended_on_fails_gets_a_warning_badge_naming_the_reason() -> None:
    run = _one_loop_run([reply.tool("lookup", q="x")] * 2, max_fails=2)
    assert run.status == "finished" and run.stop_reasons == {"w/0.loop": "fails"}
    page = _html.run_html(run)
    badge = re.search(r'<span style="[^"]*background:([^"]+)">finished · fails</span>', page)
    assert badge is not None and badge.group(1) == _html._COLORS["fails"]
    assert "(empty answer)" in page


def test_a_run_that_answered_keeps_the_green_finished_badge() -> None:
    page = _html.run_html(_one_loop_run(["Done."]))
    assert f'background:{_html._COLORS["finished"]}">finished</span>' in page


def test_counts_of_one_are_singular() -> None:
    run = _one_loop_run([reply.tool("lookup", q="x"), "Done."])
    page = _html.run_html(run)
    assert "1 tool call ·" not in page  # the last item has no separator after it
    assert "2 model calls · 1 tool call" in page
    assert "1 tool calls" not in page


def test_a_ten_megabyte_tool_result_is_cut_for_display_with_show_all() -> None:
    huge = "<b>" + "x" * 10_000_000

    @tool
    def dump() -> str:
        """Dump everything."""
        return huge

    agent = Agent("A", model=ScriptedModel([reply.tool("dump"), "done"]), tools=[dump])
    wf = Workflow("w", [loop(steps=[agent], until=until_answered)], max_tool_result_chars=None)
    run = wf.run("go", store=False)  # no size limit: the view cuts what the record keeps
    page = run.turns[0]._repr_html_()
    assert len(page) < _html.SHOW_ALL_CHARS + 10_000
    assert "show all (10,000,003 characters)" in page and "the record has it all" in page
    assert "<b>" not in page.split("show all", 1)[0].split("<pre", 2)[-1]  # escaped
    assert run.turns[0].tool_calls[0].result == huge  # the record keeps it all
    assert len(run._repr_html_()) < 100_000


def test_a_short_text_has_no_show_all() -> None:
    assert "<details>" not in _html.long_text("short", "")
    cut = _html.long_text("y" * (_html.SHOWN_CHARS + 1), "")
    assert "<details><summary>show all (4,001 characters)</summary>" in cut
    assert "the record has it all" not in cut
