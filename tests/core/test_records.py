"""Run, records and the report tree: JSON round trips, reprs, history processors."""

from __future__ import annotations

from helpers import add_call, calc, fail_call
from pydantic import BaseModel

from thena_nb import (
    Agent,
    Budget,
    Message,
    Run,
    Workflow,
    keep_first_and_recent,
    loop,
    parallel,
    until_answered,
)
from thena_nb.core.records.types import HistoryView, ToolCall
from thena_nb.models import ScriptedModel


class S(BaseModel):
    verdict: str = ""


def sample_run() -> Run:
    a = Agent("A", model=ScriptedModel(["a"]))
    b = Agent("B", model=ScriptedModel(["b"]), output_field="verdict")
    work = loop(steps=[calc([add_call(), fail_call(), "done"])], until=until_answered)
    return Workflow("review", [parallel([a, b]), work], state=S).run("go")


def test_json_round_trip_rebuilds_the_same_run() -> None:
    run = sample_run()
    back = Run.from_json(run.to_json(), state_type=S)
    assert back.turns == run.turns
    assert back.history == run.history
    assert back.report == run.report
    assert back.usage == run.usage
    assert back.state == run.state
    assert (back.status, back.output, back.run_id) == (run.status, run.output, run.run_id)
    assert back.loops[0].failures == run.loops[0].failures
    plain = Run.from_json(run.to_json())
    assert plain.state == {"verdict": "b"}


def test_report_tree_paths_and_turn_indexes() -> None:
    run = sample_run()
    paths = [(n.kind, n.path) for n in run.report.walk()]
    assert paths[:4] == [
        ("workflow", "review"),
        ("parallel", "review/0.parallel"),
        ("agent", "review/0.parallel/0.A"),
        ("agent", "review/0.parallel/1.B"),
    ]
    assert ("loop", "review/1.loop") in paths
    assert run.report.turn_indexes() == [0, 1, 2, 3, 4]
    assert run.loops[0].turn_indexes() == [2, 3, 4]
    assert run.turn_infos == [t.info for t in run.turns]
    assert run.stop_reasons == {"review/1.loop": "until"}


def test_turn_fields() -> None:
    run = sample_run()
    t = run.turns[2]
    assert (t.index, t.step_path, t.agent, t.iteration, t.branch) == (
        2,
        "review/1.loop/0.Calc",
        "Calc",
        1,
        None,
    )
    assert t.model == "scripted" and t.attempts == 1 and t.duration_s >= 0
    assert t.finish_reason == "tool_use" and run.turns[4].finish_reason == "end_turn"


def test_reprs_are_short() -> None:
    run = sample_run()
    assert repr(run).startswith("Run('review', status='finished', turns=5, stop_reasons=[until]")
    assert repr(Budget(max_tokens=10)) == "Budget(max_tokens=10)"
    assert repr(ScriptedModel(["a"])) == "ScriptedModel(1 replies)"
    wf = Workflow("w", [loop(steps=[calc(["x"])], until=until_answered, max_iterations=3)])
    assert repr(wf) == "Workflow('w', [loop(steps=[Calc], until=until_answered, max_iterations=3)])"


def _history(n_pairs: int) -> list[Message]:
    msgs = [Message(role="user", content="task")]
    for i in range(n_pairs):
        call = ToolCall(id=f"c{i}", name="add", arguments={})
        msgs.append(Message(role="assistant", content="", tool_calls=[call]))
        msgs.append(Message(role="tool", content=str(i), tool_call_id=f"c{i}"))
    return msgs


def test_keep_first_and_recent_never_separates_a_result_from_its_call() -> None:
    history = _history(5)
    kept = keep_first_and_recent(3)(history)
    assert kept[0].content == "task"
    assert kept[1].role == "assistant"
    assert [m.role for m in kept[1:]] == ["assistant", "tool", "assistant", "tool"]
    for n in range(1, 10):
        kept = keep_first_and_recent(n)(history)
        assert kept[1].role != "tool" or len(kept) == len(history)
    short = _history(1)
    assert list(keep_first_and_recent(5)(short)) == short


def test_history_processor_shapes_the_request() -> None:
    model = ScriptedModel([add_call()] * 4 + ["done"])
    agent = Agent("A", model=model, tools=calc([]).tools, history=keep_first_and_recent(2))
    Workflow("w", [loop(steps=[agent], until=until_answered)]).run("go")
    last = list(model.requests[-1].messages)
    assert [m.role for m in last] == ["user", "assistant", "tool"]
    assert last[0].content == "go"


def test_history_view_is_a_read_only_sequence() -> None:
    items = _history(2)
    view = HistoryView(items, 3)
    assert len(view) == 3 and view[-1] is items[2] and view[1:] == items[1:3]
    items.append(Message(role="user", content="later"))
    assert len(view) == 3
    assert view == items[:3]
    assert list(reversed(view)) == items[:3][::-1]


def test_state_written_by_output_field() -> None:
    run = sample_run()
    assert run.state.verdict == "b"
