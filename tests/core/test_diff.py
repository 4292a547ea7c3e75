"""Run diffs: turns aligned by where they ran, and the first divergence with its cause."""

from __future__ import annotations

import itertools

import pytest
from helpers import add, add_call

from thena_nb import (
    Agent,
    Budget,
    Run,
    ToolCall,
    Workflow,
    loop,
    max_tool_calls,
    parallel,
    tool,
    until_answered,
)
from thena_nb.core.parts.changes import apply_changes
from thena_nb.core.runs.diff import RunDiff
from thena_nb.experiments import Experiment
from thena_nb.models import FunctionModel, ModelRequest, Reply, ScriptedModel, reply


def sums(replies: list[object] | None = None, **loop_kw: object) -> Workflow:
    """A tool loop: two `add` calls, then an answer (unless other replies are given)."""
    script = replies if replies is not None else [add_call(), add_call(2, 2), "done"]
    agent = Agent("Calc", model=ScriptedModel(script), tools=[add])
    return Workflow("sums", [loop(steps=[agent], until=until_answered, **loop_kw)])  # type: ignore[arg-type]


# -- agreement -------------------------------------------------------------------------------


def test_two_runs_of_the_same_workflow_agree() -> None:
    wf = sums()
    d = wf.run("go", store=False).diff(wf.run("go", store=False))
    assert d.first_divergence is None
    assert d.divergence_pair is None
    assert [(p.turn_a, p.turn_b, p.differs) for p in d.pairs] == [(i, i, ()) for i in range(3)]


def test_a_replay_agrees_with_its_recording() -> None:
    wf = sums()
    run = wf.run("go", store=False)
    again = wf.run("go", replay=run, store=False)
    d = run.diff(again)
    assert d.first_divergence is None
    assert all(not p.differs for p in d.pairs)


def test_a_run_agrees_with_its_json_round_trip() -> None:
    """A run read back from JSON has no workflow; the record alone is enough."""
    run = sums().run("go", store=False)
    assert run.diff(Run.from_json(run.to_json())).first_divergence is None


# -- agent -----------------------------------------------------------------------------------


def test_a_fork_with_a_changed_system_prompt_diverges_at_the_fork_point() -> None:
    run = sums().run("go", store=False)
    forked = run.fork(
        2, changes={"Calc": {"system": "Be brief.", "model": ScriptedModel(["4."])}}, store=False
    )
    d = run.diff(forked)
    div = d.first_divergence
    assert div is not None
    assert (div.turn_a, div.turn_b, div.cause, div.changed) == (2, 2, "agent", ("system",))
    assert div.step_path == "sums/0.loop/0.Calc"
    assert "system prompt '' → 'Be brief.'" in div.detail
    # The copied turns asked what the parent's asked (their request keys are the parent's):
    # the frame and `first_divergence` agree that the runs part at turn 2.
    assert [p.reused for p in d.pairs[:2]] == [True, True]
    assert [p.differs for p in d.pairs[:2]] == [(), ()]
    assert [t.request_key for t in forked.turns[:2]] == [t.request_key for t in run.turns[:2]]
    frame = d.frame()
    assert frame["differs"].isna().tolist()[:2] == [True, True]
    assert not frame["request_differs"].iloc[:2].any()
    assert frame["request_differs"].iloc[2]


def test_a_fork_of_a_fork_keeps_the_first_runs_request_keys() -> None:
    run = sums().run("go", store=False)
    first = run.fork(1, changes={"Calc": {"system": "Be brief."}}, store=False)
    second = first.fork(2, changes={"Calc": {"system": "Be briefer."}}, store=False)
    assert second.turns[0].request_key == run.turns[0].request_key
    assert second.turns[1].request_key == first.turns[1].request_key != run.turns[1].request_key
    assert first.diff(second).first_divergence.turn_a == 2  # type: ignore[union-attr]


def test_a_gate_edit_is_no_other_reply_when_the_model_said_the_same() -> None:
    """Two runs whose gate edited the same model call otherwise: the model answered alike
    (the diff compares `original_arguments`), and what ran differs as the call's outcome."""
    from thena_nb import Decision

    gated_add = tool(add.fn, name="add", gate=True)

    def run_with(edit: dict[str, int]) -> Run:
        agent = Agent("Calc", model=ScriptedModel([add_call(1, 1), "done"]), tools=[gated_add])
        wf = Workflow("sums", [loop(steps=[agent], until=until_answered)])
        return wf.run("go", store=False, approve=lambda call: Decision.edit(edit))

    a, b = run_with({"a": 5, "b": 5}), run_with({"a": 6, "b": 6})
    assert a.turns[0].tool_calls[0].original_arguments == {"a": 1, "b": 1}
    d = a.diff(b)
    first = d.pairs[0]
    assert "reply" not in first.differs
    assert "tool_results" in first.differs
    div = d.first_divergence
    assert div is not None and div.cause == "tool_result"
    assert "a gate edited the call otherwise: add(a=5, b=5) → add(a=6, b=6)" in div.detail
    same = a.diff(run_with({"a": 5, "b": 5}))
    assert same.first_divergence is None


def test_a_replay_with_a_changed_prompt_diverges_where_that_agent_first_asks() -> None:
    planner = Agent("Planner", model=ScriptedModel(["plan"]))
    worker = Agent("Worker", model=ScriptedModel(["work"]))
    run = Workflow("w", [planner, worker]).run("go", store=False)
    changed = Workflow("w", [planner, worker.replace(system="Be quick.")])
    again = changed.run("go", replay=run, store=False)
    div = run.diff(again).first_divergence
    assert div is not None
    assert (div.turn_a, div.cause, div.changed) == (1, "agent", ("system",))
    assert again.turns[0].replayed and not again.turns[1].replayed


def test_a_changed_tool_signature_is_a_change_of_the_agent() -> None:
    @tool
    def add(a: int, b: int, c: int = 0) -> int:
        """Add two or three numbers."""
        return a + b + c

    run = sums().run("go", store=False)
    again = apply_changes(sums(), {"Calc": {"tools": [add]}}).run("go", replay=run, store=False)
    div = run.diff(again).first_divergence
    assert div is not None
    assert (div.turn_a, div.cause, div.changed) == (0, "agent", ("tools",))


def test_without_the_workflows_a_changed_model_is_read_from_the_turns() -> None:
    run = sums().run("go", store=False)
    other = apply_changes(
        sums(), {"Calc": {"model": ScriptedModel([add_call(), "done"], name="other")}}
    ).run("go", store=False)
    loaded_a, loaded_b = Run.from_json(run.to_json()), Run.from_json(other.to_json())
    div = loaded_a.diff(loaded_b).first_divergence
    assert div is not None
    assert (div.cause, div.changed) == ("agent", ("model",))
    assert "'scripted' → 'other'" in div.detail


# -- message ---------------------------------------------------------------------------------


def test_another_input_is_an_earlier_message_that_differs() -> None:
    wf = sums()
    d = wf.run("go", store=False).diff(wf.run("go on", store=False))
    div = d.first_divergence
    assert div is not None
    assert (div.turn_a, div.turn_b, div.cause, div.message) == (0, 0, "message", 0)
    assert "the input" in div.detail and "'go' → 'go on'" in div.detail


def _random_ids(calls: int) -> FunctionModel:
    """A model that makes `calls` calls of `add(a=1, b=1)`, each with an id of its own, as a
    live API does, then answers."""
    counter = itertools.count()

    def respond(request: ModelRequest) -> Reply:
        n = sum(1 for m in request.messages if m.role == "assistant")
        if n >= calls:
            return Reply(text="done")
        call = ToolCall(
            id=f"toolu_{next(counter)}_{id(request)}", name="add", arguments={"a": 1, "b": 1}
        )
        return Reply(text="", tool_calls=[call])

    return FunctionModel(respond)


def test_tool_call_ids_alone_are_no_divergence() -> None:
    """A live model gives every call a new id: the request keys then differ at every later
    turn, but the same calls with other ids are the same run."""
    wf = Workflow(
        "w", [loop(steps=[Agent("A", model=_random_ids(3), tools=[add])], until=until_answered)]
    )
    a, b = wf.run("go", store=False), wf.run("go", store=False)
    d = a.diff(b)
    assert all("request" in p.differs for p in d.pairs[1:])
    assert d.first_divergence is None


def test_with_other_ids_a_changed_prompt_is_still_found_from_the_workflows() -> None:
    agent = Agent("A", model=_random_ids(3), tools=[add])
    wf = Workflow("w", [loop(steps=[agent], until=until_answered)])
    run = wf.run("go", store=False)
    forked = run.fork(2, changes={"A": {"system": "Be brief."}}, store=False)
    div = run.diff(forked).first_divergence
    assert div is not None
    assert (div.turn_a, div.cause, div.changed) == (2, "agent", ("system",))


# -- reply and tool result -------------------------------------------------------------------


def test_the_same_request_answered_otherwise_is_a_reply_divergence() -> None:
    run = sums().run("go", store=False)
    other = sums([add_call(), add_call(3, 3), "done"]).run("go", store=False)
    div = run.diff(other).first_divergence
    assert div is not None
    assert (div.turn_a, div.cause, div.changed) == (1, "reply", ("tool_calls",))
    assert "add(a=2, b=2)" in div.detail and "add(a=3, b=3)" in div.detail


def test_another_answer_text_is_a_reply_divergence() -> None:
    run = sums().run("go", store=False)
    other = sums([add_call(), add_call(2, 2), "finished"]).run("go", store=False)
    div = run.diff(other).first_divergence
    assert div is not None
    assert (div.turn_a, div.cause, div.changed) == (2, "reply", ("text",))


def test_a_changed_tool_that_returns_otherwise_is_a_tool_result_divergence() -> None:
    @tool(name="add")
    def off_by_one(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b + 1

    run = sums().run("go", store=False)
    # Same name, description and schema: the agent asks the same; only the result differs.
    other = apply_changes(sums(), {"Calc": {"tools": [off_by_one]}}).run("go", store=False)
    d = run.diff(other)
    div = d.first_divergence
    assert div is not None
    assert (div.turn_a, div.turn_b, div.cause, div.changed) == (0, 0, "tool_result", ("add",))
    assert "add(a=1, b=1) returned '2' → '3'" in div.detail
    assert d.pairs[0].differs == ("tool_results",)
    assert d.pairs[1].differs == ("request", "tool_results")


def test_a_tool_that_fails_now_is_a_tool_result_divergence() -> None:
    @tool(name="add")
    def broken(a: int, b: int) -> int:
        """Add two numbers."""
        raise RuntimeError("down")

    run = sums().run("go", store=False)
    agent = Agent("Calc", model=ScriptedModel([add_call(), add_call(2, 2), "done"]), tools=[broken])
    other = Workflow("sums", [loop(steps=[agent], until=until_answered)]).run("go", store=False)
    div = run.diff(other).first_divergence
    assert div is not None and div.cause == "tool_result"
    assert "→ error" in div.detail and "RuntimeError" in div.detail


# -- stop ------------------------------------------------------------------------------------


def test_a_lower_max_iterations_stops_the_loop_sooner() -> None:
    run = sums().run("go", store=False)
    fewer = apply_changes(sums(), {"sums/0.loop": {"max_iterations": 2}})
    other = fewer.run("go", replay=run, store=False)
    d = run.diff(other)
    div = d.first_divergence
    assert div is not None
    assert (div.turn_a, div.turn_b, div.cause) == (2, None, "stop")
    assert set(div.changed) == {"stop_reason", "iterations", "max_iterations"}
    assert "loop 'sums/0.loop' stopped sooner in run b" in div.detail
    assert "3 iterations (until) in run a, 2 iterations (exhausted) in run b" in div.detail
    assert "max_iterations 10 → 2" in div.detail
    assert d.pairs[2].differs == ("only_a",)


def test_another_until_stops_the_loop_sooner() -> None:
    run = sums().run("go", store=False)
    stop_early = apply_changes(sums(), {"sums/0.loop": {"until": max_tool_calls(1)}})
    other = stop_early.run("go", replay=run, store=False)
    div = other.diff(run).first_divergence  # run a is the one that stopped sooner here
    assert div is not None
    assert (div.turn_a, div.turn_b, div.cause) == (None, 1, "stop")
    assert "until" in div.changed
    assert "stopped sooner in run a" in div.detail


def test_a_loop_that_stops_sooner_still_pairs_the_steps_after_it() -> None:
    def build(until: object) -> Workflow:
        worker = Agent("Worker", model=ScriptedModel([add_call(), add_call(), "done"]), tools=[add])
        summary = Agent("Summary", model=ScriptedModel(["summary"]))
        return Workflow("w", [loop(steps=[worker], until=until), summary])  # type: ignore[arg-type]

    long_run = build(until_answered).run("go", store=False)
    short_run = build(max_tool_calls(1)).run("go", store=False)
    d = long_run.diff(short_run)
    assert [(p.turn_a, p.turn_b) for p in d.pairs] == [(0, 0), (1, None), (2, None), (3, 1)]
    assert d.pairs[3].step_path == "w/1.Summary"
    div = d.first_divergence
    assert div is not None and (div.turn_a, div.cause) == (1, "stop")


def test_a_budget_that_ends_a_run_sooner_is_a_stop() -> None:
    run = sums().run("go", store=False)
    short = apply_changes(sums(), {"sums": {"budget": Budget(max_model_calls=1)}})
    other = short.run("go", replay=run, store=False)
    div = run.diff(other).first_divergence
    assert div is not None
    assert (div.turn_a, div.cause) == (1, "stop")
    assert "(budget) in run b" in div.detail


def test_nested_loops_pair_by_the_iteration_of_every_loop() -> None:
    """The inner loop's turns of outer iteration 2 pair with each other, not with the
    inner loop's extra turn of iteration 1 in the other run."""

    def build(first_inner: int) -> Workflow:
        calls = [add_call()] * (first_inner - 1) + ["inner done", "outer", "inner done", "outer"]
        inner = Agent("Inner", model=ScriptedModel(calls), tools=[add])
        outer = loop(
            steps=[loop(steps=[inner], until=until_answered)], until=lambda ctx: ctx.iteration == 2
        )
        return Workflow("w", [outer])

    two, three = build(2).run("go", store=False), build(3).run("go", store=False)
    d = two.diff(three)
    assert [(p.turn_a, p.turn_b) for p in d.pairs] == [(0, 0), (1, 1), (None, 2), (2, 3)]
    div = d.first_divergence
    assert div is not None and div.turn_a == 1 and div.cause == "reply"


# -- steps -----------------------------------------------------------------------------------


def test_an_extra_step_is_a_steps_divergence() -> None:
    a = Agent("A", model=ScriptedModel(["one"]))
    b = Agent("B", model=ScriptedModel(["two"]))
    short, long_ = (
        Workflow("w", [a]).run("go", store=False),
        Workflow("w", [a, b]).run("go", store=False),
    )
    div = short.diff(long_).first_divergence
    assert div is not None
    assert (div.turn_a, div.turn_b, div.cause) == (None, 1, "steps")


def test_a_run_that_failed_sooner_is_named_with_its_error() -> None:
    run = sums().run("go", store=False)
    boom = sums([add_call(), reply.error(RuntimeError("model down"))])
    with pytest.raises(RuntimeError) as caught:
        boom.run("go", store=False)
    failed = caught.value.run  # type: ignore[attr-defined]
    div = run.diff(failed).first_divergence
    assert div is not None
    assert (div.turn_a, div.turn_b, div.cause, div.changed) == (1, None, "steps", ("status",))
    assert "'failed'" in div.detail and "model down" in div.detail


# -- parallel --------------------------------------------------------------------------------


def test_a_changed_branch_diverges_at_its_own_turn() -> None:
    def build(system: str) -> Workflow:
        sec = Agent("Security", model=ScriptedModel(["secure"]))
        perf = Agent("Perf", model=ScriptedModel(["fast"]), system=system)
        return Workflow(
            "review", [parallel([sec, perf]), Agent("Lead", model=ScriptedModel(["ok"]))]
        )

    run = build("").run("go", store=False)
    other = build("Be brief.").run("go", replay=run, store=False)
    d = run.diff(other)
    div = d.first_divergence
    assert div is not None
    assert (div.turn_a, div.step_path, div.cause) == (1, "review/0.parallel/1.Perf", "agent")
    assert d.pairs[0].differs == ()


# -- the view --------------------------------------------------------------------------------


def test_repr_names_the_divergence() -> None:
    run = sums().run("go", store=False)
    text = repr(run.diff(sums().run("stop", store=False)))
    assert text.startswith(f"RunDiff({run.run_id!r}, ")
    assert "first divergence at turn 0 of a, 0 of b" in text and "message" in text
    assert "the runs agree" in repr(run.diff(run))


def test_html_marks_the_words_that_differ_and_escapes_model_text() -> None:
    run = sums([add_call(), "The sum is <b>4</b>."]).run("go", store=False)
    other = sums([add_call(), "The sum is <script>alert(1)</script>."]).run("go", store=False)
    page = run.diff(other)._repr_html_()
    assert "<script>" not in page
    assert "&lt;script&gt;" in page
    assert "<del" in page and "<ins" in page
    assert "the first turn agrees" in page
    assert 'class="thena-diff"' in page


def test_html_of_runs_that_agree_says_so() -> None:
    run = sums().run("go", store=False)
    assert "agree turn for turn" in run.diff(run)._repr_html_()


def test_html_shows_a_turn_only_one_run_has() -> None:
    run = sums().run("go", store=False)
    other = apply_changes(sums(), {"sums/0.loop": {"max_iterations": 2}}).run("go", store=False)
    page = run.diff(other)._repr_html_()
    assert "only in run a" in page and "no turn here" in page


def test_a_diff_is_a_run_diff() -> None:
    run = sums().run("go", store=False)
    assert isinstance(run.diff(run), RunDiff)


# -- experiments -----------------------------------------------------------------------------


def _experiment() -> Experiment:
    agent = Agent("Greeter", model=ScriptedModel(["Hello!"]))
    wf = Workflow("hello", [agent])
    variants = {"plain": {}, "brief": {"Greeter": {"system": "Be brief."}}}
    return wf.map(["hi", "hey"], variants=variants, store=False, progress=False)


def test_experiment_diff_diffs_two_variants_runs_of_one_input() -> None:
    exp = _experiment()
    d = exp.diff("plain", "brief", input="hey")
    runs = {(r.input, r.workflow.steps[0].system): r for r in exp.runs}
    assert d.a is runs[("hey", "")] and d.b is runs[("hey", "Be brief.")]
    div = d.first_divergence
    assert div is not None and (div.cause, div.changed) == ("agent", ("system",))
    assert exp.diff("plain", "plain", input="hi").first_divergence is None


def test_experiment_diff_says_what_is_wrong() -> None:
    exp = _experiment()
    with pytest.raises(ValueError, match="no variant 'terse'; variants: 'plain', 'brief'"):
        exp.diff("plain", "terse", input="hi")
    with pytest.raises(ValueError, match="no input 'yo'"):
        exp.diff("plain", "brief", input="yo")
    with pytest.raises(ValueError, match="2 inputs; say which with `input=`"):
        exp.diff("plain", "brief")
