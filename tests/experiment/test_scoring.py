"""Scorers on experiments: cases, the built-in scorers, the judge, repeats, intervals, rescore."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime
from typing import Any

import pytest

from thena_nb import (
    Agent,
    Case,
    ReportNode,
    Run,
    ToolCall,
    Turn,
    TurnInfo,
    Workflow,
    loop,
    tool,
    until_answered,
)
from thena_nb.experiments._stats import bootstrap_interval, pass_at_k, wilson_interval
from thena_nb.experiments.cases import as_cases
from thena_nb.models import FunctionModel, ModelRequest, ScriptedModel, reply
from thena_nb.scorers import (
    Score,
    contains,
    equals,
    judge,
    matches,
    max_turns,
    no_failed_tools,
    stop_reason,
    tool_trajectory,
)
from thena_nb.store import MemoryRunStore

# -- hand-built runs ---------------------------------------------------------------------------


def hand_run(calls: list[tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], bool]],
             *, output: Any = "done", stops: dict[str, str] | None = None) -> Run:  # fmt: skip
    """A run with one turn per call (`(name, arguments[, ok])`) and a final answer."""
    run = Run(workflow_name="w", input="x")
    for i, call in enumerate(calls):
        name, arguments, ok = (*call, True) if len(call) == 2 else call
        info = TurnInfo(called_tool=True, tool_name=name, tool_error=not ok,
                        tool_call_source="native")  # fmt: skip
        made = ToolCall(id=f"c{i}", name=name, arguments=arguments, ok=ok)
        run.turns.append(Turn(index=i, step_path="w/0.loop/0.A", agent="A", info=info,
                              tool_calls=[made], started_at=datetime.now(UTC)))  # fmt: skip
    answer = TurnInfo(called_tool=False, response=str(output))
    run.turns.append(Turn(index=len(calls), step_path="w/0.loop/0.A", agent="A", info=answer,
                          started_at=datetime.now(UTC)))  # fmt: skip
    for path, reason in (stops or {}).items():
        run.report.children.append(ReportNode(kind="loop", name="loop", path=path,
                                              stop_reason=reason))  # fmt: skip
    run.output = output
    run.status = "finished"
    return run


CASE = Case("x")
TRIP = hand_run([("flights", {"city": "Lisbon"}), ("hotel", {"city": "Lisbon", "nights": 2}),
                 ("flights", {"city": "Porto"})])  # fmt: skip


@pytest.mark.parametrize(
    ("calls", "exact", "in_order", "any_order"),
    [
        (["flights", "hotel", "flights"], True, True, True),
        (["flights", "flights", "hotel"], False, False, True),  # same calls, another order
        (["flights", "hotel"], False, True, True),  # a prefix
        (["flights", "flights"], False, True, True),  # with a call between them
        (["hotel", "flights"], False, True, True),
        (["hotel", "hotel"], False, False, False),  # made once: counts once
        (["flights", "hotel", "flights", "hotel"], False, False, False),  # one too many
        ([], False, True, True),
        (["weather"], False, False, False),
    ],
)
def test_tool_trajectory_modes_by_name(
    calls: list[str], exact: bool, in_order: bool, any_order: bool
) -> None:
    assert tool_trajectory(calls)(TRIP, CASE) is exact
    assert tool_trajectory(calls, mode="in_order")(TRIP, CASE) is in_order
    assert tool_trajectory(calls, mode="any_order")(TRIP, CASE) is any_order


def test_tool_trajectory_arguments_given_must_match_and_others_may_be_anything() -> None:
    porto_then_hotel = [("flights", {"city": "Porto"}), ("hotel", {})]
    assert tool_trajectory([("flights", {"city": "Lisbon"}), "hotel", "flights"])(TRIP, CASE)
    assert tool_trajectory([("hotel", {"nights": 2})], mode="any_order")(TRIP, CASE)
    assert not tool_trajectory([("hotel", {"nights": 3})], mode="any_order")(TRIP, CASE)
    assert not tool_trajectory([("hotel", {"stars": 4})], mode="any_order")(TRIP, CASE)
    assert not tool_trajectory(porto_then_hotel, mode="in_order")(TRIP, CASE)
    assert tool_trajectory(porto_then_hotel, mode="any_order")(TRIP, CASE)


def test_any_order_matches_every_wanted_call_to_a_call_of_its_own() -> None:
    """A general `flights` must not take the one Lisbon call that the specific one needs."""
    run = hand_run([("flights", {"city": "Lisbon"}), ("flights", {"city": "Porto"})])
    wanted = ["flights", ("flights", {"city": "Lisbon"})]
    assert tool_trajectory(wanted, mode="any_order")(run, CASE)
    too_many = ["flights", ("flights", {"city": "Lisbon"}), ("flights", {"city": "Lisbon"})]
    assert not tool_trajectory(too_many, mode="any_order")(run, CASE)


def test_tool_trajectory_counts_failed_calls_and_no_failed_tools_sees_them() -> None:
    run = hand_run([("flights", {"city": "Nowhere"}, False), ("flights", {"city": "Lisbon"})])
    assert tool_trajectory(["flights", "flights"])(run, CASE)
    assert not no_failed_tools()(run, CASE)
    assert no_failed_tools()(TRIP, CASE)
    assert tool_trajectory([])(hand_run([]), CASE)


def test_tool_trajectory_rejects_a_bad_mode_or_call() -> None:
    with pytest.raises(ValueError, match="`mode` must be one of"):
        tool_trajectory(["a"], mode="sorted")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a tool name or"):
        tool_trajectory([("a", "b")])  # type: ignore[list-item]


def test_output_scorers_read_the_case_expected_when_given_nothing() -> None:
    run = hand_run([], output="The capital is Paris.")
    assert equals("The capital is Paris.")(run, CASE)
    assert equals()(run, Case("x", expected="The capital is Paris."))
    assert not equals()(run, Case("x", expected="Paris"))
    assert contains("paris")(run, CASE)
    assert not contains("paris", case_sensitive=True)(run, CASE)
    assert contains()(run, Case("x", expected="PARIS"))
    assert matches(r"capital is \w+\.$")(run, CASE)
    assert matches()(run, Case("x", expected=r"P.r"))
    assert not matches(r"^Paris")(run, CASE)
    with pytest.raises(ValueError, match="nothing to compare with"):
        equals()(run, CASE)
    assert equals(42)(hand_run([], output=42), CASE)  # outputs need not be text
    assert contains("42")(hand_run([], output=42), CASE)


def test_stop_reason_max_turns_and_reprs() -> None:
    run = hand_run([("a", {})], stops={"w/0.loop": "until", "w/1.loop": "exhausted"})
    assert stop_reason("exhausted")(run, CASE)
    assert stop_reason("fails", "until")(run, CASE)
    assert not stop_reason("until", loop="w/1.loop")(run, CASE)
    assert not stop_reason("until")(hand_run([]), CASE)  # no loop at all
    with pytest.raises(ValueError, match="no loop 'w/9.loop'"):
        stop_reason("until", loop="w/9.loop")(run, CASE)
    with pytest.raises(ValueError, match="not a stop reason"):
        stop_reason("finished")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one"):
        stop_reason()
    assert max_turns(2)(run, CASE) and not max_turns(1)(run, CASE)
    assert repr(contains("a", case_sensitive=True)) == "contains('a', case_sensitive=True)"
    assert repr(tool_trajectory(["a", ("b", {"q": 1})], mode="in_order", name="t")) == (
        "tool_trajectory(['a', ('b', {'q': 1})], mode='in_order', name='t')"
    )
    assert repr(stop_reason("until", loop="w/0.loop")) == "stop_reason('until', loop='w/0.loop')"
    assert (equals().name, no_failed_tools(name="clean").name) == ("equals", "clean")


# -- experiments with scorers ------------------------------------------------------------------


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def capital(request: ModelRequest) -> Any:
    """Looks up once unless told to be brief, then answers by the question."""
    if "brief" not in request.system and not any(m.role == "tool" for m in request.messages):
        return reply.tool("lookup", q="capital")
    return "Paris" if "France" in request.messages[0].content else "I do not know."


def capitals(model: Any) -> Workflow:
    agent = Agent("Geo", model=model, tools=[lookup])
    return Workflow("capitals", [loop(steps=[agent], until=until_answered, max_iterations=3)])


CASES = [
    Case("Capital of France?", expected="Paris", name="france"),
    Case("Capital of Peru?", expected="Lima", name="peru"),
]
VARIANTS = {"brief": {"Geo": {"system": "Be brief."}}, "thorough": {}}


def test_scores_are_frame_columns_and_compare_gives_means_with_intervals() -> None:
    exp = capitals(FunctionModel(capital)).map(
        CASES, variants=VARIANTS, scorers=[equals(), tool_trajectory(["lookup"]), max_turns(1)],
        store=False, progress=False,
    )  # fmt: skip
    frame = exp.frame()
    assert list(frame.columns[:3]) == ["input", "case", "variant"]
    assert list(frame.columns[-4:]) == ["equals", "tool_trajectory", "max_turns", "scorer_error"]
    assert str(frame["equals"].dtype) == "boolean"
    assert list(frame["case"]) == ["france", "france", "peru", "peru"]
    assert list(frame["equals"]) == [True, True, False, False]
    assert list(frame["tool_trajectory"]) == [False, True, False, True]
    assert frame["scorer_error"].isna().all()

    compare = exp.compare()
    assert list(compare.columns[-10:]) == [
        "equals", "equals_ci_low", "equals_ci_high", "tool_trajectory", "tool_trajectory_ci_low",
        "tool_trajectory_ci_high", "max_turns", "max_turns_ci_low", "max_turns_ci_high",
        "scorer_errors",
    ]  # fmt: skip
    brief = compare.loc["brief"]
    assert brief["equals"] == 0.5
    assert (brief["equals_ci_low"], brief["equals_ci_high"]) == pytest.approx(wilson_interval(1, 2))
    assert (brief["max_turns"], brief["tool_trajectory"]) == (1.0, 0.0)
    assert compare.loc["thorough", "max_turns"] == 0.0
    assert not any("pass@" in c for c in compare.columns)  # no repeats, no pass@k


def test_without_scorers_the_frame_and_compare_keep_their_columns() -> None:
    exp = capitals(ScriptedModel(["Paris"])).map(["a"], store=False, progress=False)
    assert "scorer_error" not in exp.frame().columns
    assert "scorer_errors" not in exp.compare().columns
    assert exp.scorers == {}


def test_a_scorer_that_raises_or_returns_no_score_is_an_error_in_its_row_only() -> None:
    def boom(run: Run, case: Case) -> bool:
        if "Peru" in run.input:
            raise RuntimeError("scorer broke")
        return True

    def none(run: Run, case: Case) -> Any:
        return None

    exp = capitals(FunctionModel(capital)).map(
        CASES, scorers={"boom": boom, "none": none, "paris": contains("Paris")}, store=False,
        progress=False,
    )  # fmt: skip
    frame = exp.frame()
    assert [r.status for r in exp.runs] == ["finished", "finished"]
    assert list(frame["boom"].astype(object).where(frame["boom"].notna(), None)) == [True, None]
    assert frame["none"].isna().all()
    assert list(frame["paris"]) == [True, False]  # the other scorers went on
    errors = list(frame["scorer_error"])
    assert errors[0] == "none: TypeError: returned None; a scorer returns a bool, a finite " \
        "number or a Score"  # fmt: skip
    assert errors[1].startswith("boom: RuntimeError: scorer broke; none: TypeError")
    compare = exp.compare()
    assert compare.loc["base", "scorer_errors"] == 2
    assert compare.loc["base", "boom"] == 1.0  # over the runs it scored


def test_numbers_scores_and_async_scorers() -> None:
    def length(run: Run, case: Case) -> float:
        return len(str(run.output))

    def graded(run: Run, case: Case) -> Score:
        return Score(0.5, "half")

    async def slow_pass(run: Run, case: Case) -> bool:
        await asyncio.sleep(0.001)
        return True

    exp = capitals(FunctionModel(capital)).map(
        CASES, scorers=[length, graded, slow_pass], store=False, progress=False
    )
    frame = exp.frame()
    assert list(frame["length"]) == [5.0, 14.0] and str(frame["length"].dtype) == "float64"
    assert list(frame["graded_explanation"]) == ["half", "half"]
    assert list(frame["slow_pass"]) == [True, True]
    base = exp.compare().loc["base"]
    assert base["length"] == 9.5
    assert base["length_ci_low"] >= 5.0 and base["length_ci_high"] <= 14.0
    assert (base["graded"], base["graded_ci_low"], base["graded_ci_high"]) == (0.5, 0.5, 0.5)


def test_bad_scorers_fail_before_any_run() -> None:
    model = FunctionModel(capital)
    wf = capitals(model)
    with pytest.raises(ValueError, match="two scorers are named 'contains'"):
        wf.map(CASES, scorers=[contains("a"), contains("b")], store=False, progress=False)
    with pytest.raises(ValueError, match="no name to use as a column"):
        wf.map(CASES, scorers=[lambda run, case: True], store=False, progress=False)
    with pytest.raises(ValueError, match="'turns' is already a column"):
        wf.map(CASES, scorers={"turns": max_turns(2)}, store=False, progress=False)
    with pytest.raises(TypeError, match="single scorer"):
        wf.map(CASES, scorers=contains("a"), store=False, progress=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`repeats` must be"):
        wf.map(CASES, repeats=0, store=False, progress=False)
    assert model.requests == []
    exp = wf.map(CASES, scorers=[contains("a"), contains("b", name="b")], store=False,
                 progress=False)  # fmt: skip
    assert list(exp.scorers) == ["contains", "b"]


# -- the judge ---------------------------------------------------------------------------------


def grader(request: ModelRequest) -> Any:
    """Passes an output that names the expected city, by reading what the judge was sent."""
    prompt = request.messages[0].content
    expected = prompt.split("Expected:\n")[1].split("\n")[0]
    output = prompt.split("Output:\n")[1]
    if expected in output:
        return reply.tool("score", score=True, explanation=f"names {expected}")
    return f'Not quite. {{"score": false, "explanation": "does not name {expected}"}}'


def test_a_judge_on_a_function_model_gives_scores_and_explanations() -> None:
    grader_model = FunctionModel(grader)
    exp = capitals(FunctionModel(capital)).map(
        CASES, variants=VARIANTS, scorers=[judge(grader_model, "Names the right capital.")],
        store=False, progress=False,
    )  # fmt: skip
    frame = exp.frame()
    assert list(frame["judge"]) == [True, True, False, False]
    assert list(frame["judge_explanation"]) == [
        "names Paris", "names Paris", "does not name Lima", "does not name Lima",
    ]  # fmt: skip
    assert len(grader_model.requests) == 4
    # Each run is judged as it ends: the judge's requests come in the order the runs end.
    prompts = sorted(r.messages[0].content for r in grader_model.requests)
    sent = grader_model.requests[0]
    assert sent.system.endswith("Rubric:\nNames the right capital.")
    assert [t.name for t in sent.tools] == ["score"]
    assert sum("Task:\nCapital of France?" in p for p in prompts) == 2
    assert sum('Tool calls:\n- lookup({"q": "capital"})' in p for p in prompts) == 2
    assert exp.compare().loc["brief", "judge"] == 0.5


def test_a_judge_with_numbers_and_a_judge_that_fails() -> None:
    def numeric(request: ModelRequest) -> str:
        return '{"score": 0.8, "explanation": "mostly right"}'

    def rambles(request: ModelRequest) -> str:
        return "I would give it a good mark."

    def down(request: ModelRequest) -> str:
        raise ConnectionError("judge unreachable")

    exp = capitals(ScriptedModel(["Paris"])).map(
        ["q1", "q2"],
        scorers=[judge(FunctionModel(numeric), "r", name="numeric"),
                 judge(FunctionModel(rambles), "r", name="rambles"),
                 judge(ScriptedModel([reply.error(ConnectionError("x"))]), "r", name="down"),
                 judge(FunctionModel(down), "r", name="down2")],
        store=False, progress=False,
    )  # fmt: skip
    frame = exp.frame()
    assert list(frame["numeric"]) == [0.8, 0.8]
    assert list(frame["numeric_explanation"]) == ["mostly right"] * 2
    assert frame["rambles"].isna().all() and frame["rambles_explanation"].isna().all()
    error = frame["scorer_error"][0]
    assert "rambles: ValueError: the judge's reply holds no score" in error
    assert "down: ConnectionError" in error and "down2: ConnectionError: judge unreachable" in error
    assert repr(judge(FunctionModel(numeric), "r", name="n")) == (
        "judge(FunctionModel(numeric), 'r', name='n')"
    )


# -- repeats -----------------------------------------------------------------------------------


def coin(seed: int) -> FunctionModel:
    """Answers `Paris` or `Lyon` at random (seeded): each run is a sample of its own."""
    rng = random.Random(seed)
    return FunctionModel(lambda request: "Paris" if rng.random() < 0.5 else "Lyon", name="coin")


def test_repeats_are_runs_of_their_own_with_pass_at_k() -> None:
    exp = capitals(coin(3)).map(
        CASES[:1], variants=VARIANTS, scorers=[contains("Paris")], repeats=4, concurrency=1,
        store=False, progress=False,
    )  # fmt: skip
    assert len(exp.runs) == 8 and len({r.run_id for r in exp.runs}) == 8
    frame = exp.frame()
    assert list(frame["repeat"]) == [0, 1, 2, 3] * 2
    assert list(frame["variant"]) == ["brief"] * 4 + ["thorough"] * 4
    passed = list(frame["contains"])
    assert 0 < sum(passed) < 8  # independent samples: not all the same
    compare = exp.compare()
    for variant, mine in (("brief", passed[:4]), ("thorough", passed[4:])):
        assert compare.loc[variant, "contains"] == sum(mine) / 4
        assert compare.loc[variant, "contains_pass@4"] == (1.0 if any(mine) else 0.0)
        assert compare.loc[variant, "runs"] == 4


def test_a_scripted_model_starts_its_script_again_in_every_repeat() -> None:
    script = ScriptedModel([reply.tool("lookup", q="x"), "Paris"])
    exp = capitals(script).map(["q"], scorers=[tool_trajectory(["lookup"])], repeats=3,
                               store=False, progress=False)  # fmt: skip
    assert [r.output for r in exp.runs] == ["Paris"] * 3
    assert list(exp.frame()["tool_trajectory"]) == [True] * 3
    assert exp.compare().loc["base", "tool_trajectory_pass@3"] == 1.0


def test_running_again_reuses_repeat_by_repeat_with_no_model_call() -> None:
    model = FunctionModel(capital)
    store = MemoryRunStore()
    wf = capitals(model)
    once = wf.map(CASES, variants=VARIANTS, store=store, progress=False)
    first = wf.map(CASES, variants=VARIANTS, repeats=2, scorers=[equals()], store=store,
                   progress=False)  # fmt: skip
    assert first.reused == 4  # repeat 0 is the run made without repeats
    assert [r.run_id for r in first.runs][::2] == [r.run_id for r in once.runs]
    calls = len(model.requests)
    again = wf.map(CASES, variants=VARIANTS, repeats=3, scorers=[equals()], store=store,
                   progress=False)  # fmt: skip
    assert again.reused == 8
    assert len(model.requests) == calls + 2 * 3  # only repeat 2: 1 + 2 turns, for 2 cases
    before = len(model.requests)
    third = wf.map(CASES, variants=VARIANTS, repeats=3, scorers=[equals()], store=store,
                   progress=False)  # fmt: skip
    assert len(model.requests) == before  # no model call the second time
    assert third.reused == 12
    assert [r.run_id for r in third.runs] == [r.run_id for r in again.runs]
    assert list(third.frame()["equals"]) == list(again.frame()["equals"])


def test_rescore_makes_no_model_call_and_keeps_the_original_scores() -> None:
    model = FunctionModel(capital)
    exp = capitals(model).map(CASES, variants=VARIANTS, scorers=[equals()], repeats=2,
                              store=False, progress=False)  # fmt: skip
    calls = len(model.requests)
    rescored = exp.rescore([no_failed_tools(), stop_reason("until"), contains("paris")])
    assert len(model.requests) == calls
    assert rescored.runs == exp.runs
    assert list(rescored.scorers) == ["no_failed_tools", "stop_reason", "contains"]
    frame = rescored.frame()
    assert "equals" not in frame.columns
    assert list(frame["contains"]) == [True] * 4 + [False] * 4
    assert rescored.compare().loc["brief", "contains_pass@2"] == 0.5
    assert "equals" in exp.frame().columns and list(exp.scorers) == ["equals"]
    both = exp.rescore([*exp.scorers.values(), max_turns(1)])
    assert list(both.scorers) == ["equals", "max_turns"]


# -- intervals ---------------------------------------------------------------------------------


def test_wilson_intervals_match_known_values() -> None:
    assert wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert wilson_interval(1, 2) == pytest.approx((0.0945, 0.9055), abs=1e-4)
    # At 90 %, each bound p solves (0.8 - p)^2 = z^2 p (1 - p) / 10 with z = 1.6449.
    for bound in wilson_interval(8, 10, 0.9):
        assert (0.8 - bound) ** 2 == pytest.approx(1.644854**2 * bound * (1 - bound) / 10)
    assert wilson_interval(8, 10, 0.9) == pytest.approx((0.5408, 0.9314), abs=1e-4)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)
    with pytest.raises(ValueError):
        wilson_interval(1, 2, 1.5)


def test_compare_of_eight_passes_in_ten_runs_is_wilsons_interval() -> None:
    answers = iter(["Paris"] * 8 + ["Lyon"] * 2)
    exp = capitals(FunctionModel(lambda request: next(answers))).map(
        [f"q{i}" for i in range(10)], scorers=[contains("Paris")], concurrency=1, store=False,
        progress=False,
    )  # fmt: skip
    row = exp.compare().loc["base"]
    assert row["contains"] == 0.8
    assert (row["contains_ci_low"], row["contains_ci_high"]) == pytest.approx(
        (0.4902, 0.9433), abs=1e-4
    )
    low, high = exp.compare(confidence=0.9).loc["base", ["contains_ci_low", "contains_ci_high"]]
    assert (low, high) == pytest.approx((0.5408, 0.9314), abs=1e-4)


def test_bootstrap_intervals_are_seeded_and_sensible() -> None:
    values = [float(v) for v in range(1, 21)]
    first = bootstrap_interval(values)
    assert first == bootstrap_interval(values)  # the same seed: the same interval
    assert first != bootstrap_interval(values, seed=1)
    low, high = first
    assert low < 10.5 < high
    # The normal interval of the mean is 10.5 +/- 1.96 * 5.77 / sqrt(20): about 8.0 to 13.0.
    assert low == pytest.approx(8.0, abs=0.5) and high == pytest.approx(13.0, abs=0.5)
    assert bootstrap_interval([3.0]) == (3.0, 3.0)
    wide = bootstrap_interval(values, 0.99)
    assert wide[0] < low and wide[1] > high
    big = bootstrap_interval([float(i % 7) for i in range(20_000)], resamples=300)
    assert big[0] < 2.9986 < big[1]  # the mean of 0..6 repeated, the chunked path


def test_pass_at_k_is_the_unbiased_estimator() -> None:
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 3, 2) == pytest.approx(1 - (7 * 6) / (10 * 9))
    assert pass_at_k(3, 0, 3) == 0.0 and pass_at_k(3, 1, 3) == 1.0
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


def test_numeric_intervals_in_compare_are_reproducible() -> None:
    lengths = iter(["a" * n for n in (3, 9, 4, 12, 5, 7, 1, 8)])
    exp = capitals(FunctionModel(lambda request: next(lengths))).map(
        [f"q{i}" for i in range(8)], scorers={"chars": lambda run, case: len(run.output)},
        concurrency=1, store=False, progress=False,
    )  # fmt: skip
    columns = ["chars", "chars_ci_low", "chars_ci_high"]
    first = list(exp.compare().loc["base", columns])
    assert first == list(exp.compare().loc["base", columns])
    assert first[0] == 6.125 and first[1] < 6.125 < first[2]
    assert first[1:] == list(bootstrap_interval([3, 9, 4, 12, 5, 7, 1, 8]))


# -- the chart ---------------------------------------------------------------------------------


def test_score_chart_has_a_panel_per_scorer_and_takes_names_as_plain_text() -> None:
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure
    from matplotlib.text import Text

    variants = {r"$\frac$ cost": {"Geo": {"system": "Be brief."}}, "thorough": {}}
    exp = capitals(FunctionModel(capital)).map(
        CASES, variants=variants, scorers={"equals": equals(), "$x_2$": max_turns(1),
                                           "chars": lambda run, case: len(str(run.output))},
        repeats=2, store=False, progress=False,
    )  # fmt: skip
    before = plt.get_fignums()
    fig = exp.score_chart()
    assert isinstance(fig, Figure) and plt.get_fignums() == before  # pyplot never saw it
    shown = [ax for ax in fig.axes if ax.axison]
    assert [ax.get_title(loc="left") for ax in shown] == ["equals", "$x_2$", "chars"]
    assert [t.get_text() for t in shown[0].get_xticklabels()] == ["1", "2"]
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == [r"1  $\frac$ cost", "2  thorough"]
    assert not any(t.get_parse_math() for t in legend.get_texts())
    titles = [t for ax in shown for t in ax.get_children()
              if isinstance(t, Text) and t.get_text() == "$x_2$"]  # fmt: skip
    assert titles and not any(t.get_parse_math() for t in titles)
    assert shown[0].get_ylabel() == "pass rate" and shown[2].get_ylabel() == "mean"
    assert any("pass@2" in t.get_text() for t in shown[0].texts)
    assert fig._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n"  # renders: no mathtext error


def test_score_chart_without_scores_says_so() -> None:
    exp = capitals(ScriptedModel(["Paris"])).map(["q"], store=False, progress=False)
    fig = exp.score_chart()
    assert [t.get_text() for t in fig.axes[0].texts] == ["no scorers"]


# -- cases -------------------------------------------------------------------------------------


def test_cases_from_strings_and_cases() -> None:
    assert as_cases(["a", Case("b", expected="B", name="bee"), 3]) == [
        Case("a"), Case("b", expected="B", name="bee"), Case(3),
    ]  # fmt: skip
    assert Case(3).text == "3"
    assert repr(Case("q", metadata={"k": 1})) == "Case(input='q', metadata={'k': 1})"
    with pytest.raises(TypeError, match="single input"):
        as_cases("abc")
    with pytest.raises(TypeError, match="list of inputs or cases"):
        as_cases(5)


def test_a_pydantic_evals_dataset_gives_the_cases() -> None:
    evals = pytest.importorskip("pydantic_evals")
    dataset = evals.Dataset(
        name="capitals",
        cases=[
            evals.Case(name="france", inputs="Capital of France?", expected_output="Paris",
                       metadata={"continent": "Europe"}),
            evals.Case(name="peru", inputs="Capital of Peru?", expected_output="Lima"),
        ],
    )  # fmt: skip
    assert as_cases(dataset)[0] == Case("Capital of France?", expected="Paris", name="france",
                                        metadata={"continent": "Europe"})  # fmt: skip
    exp = capitals(FunctionModel(capital)).map(dataset, scorers=[equals()], store=False,
                                               progress=False)  # fmt: skip
    assert list(exp.frame()["case"]) == ["france", "peru"]
    assert list(exp.frame()["equals"]) == [True, False]
    again = capitals(FunctionModel(capital)).map(dataset.cases, store=False, progress=False)
    assert [r.run_id for r in again.runs] == [r.run_id for r in exp.runs]


def test_the_html_summary_shows_each_scorer_with_its_interval() -> None:
    exp = capitals(FunctionModel(capital)).map(
        CASES, scorers={"<b>right</b>": equals()}, repeats=2, store=False, progress=False
    )
    html = exp._repr_html_()
    assert "<b>right</b>" not in html and "&lt;b&gt;right&lt;/b&gt;" in html
    low, high = wilson_interval(2, 4)
    assert f"0.5 [{low:.2g}, {high:.2g}]" in html
    assert "2 repeats" in html
