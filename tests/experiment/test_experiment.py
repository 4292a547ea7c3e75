"""Experiments: grids of variants over inputs, on the local and the Ray backend."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest

from thena_nb import Agent, Workflow, loop, max_tool_calls, tool, until_answered
from thena_nb.core.records.errors import TransientModelError
from thena_nb.core.records.types import RetryPolicy
from thena_nb.experiments import Experiment, arun_experiment, grid, run_experiment
from thena_nb.models import FunctionModel, ModelRequest, ScriptedModel, reply
from thena_nb.store import MemoryRunStore

INPUTS = ["first question", "second question", "third question"]


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


LOOKUPS = [reply.tool("lookup", q=f"q{i}") for i in range(4)]  # made once: stable call ids


def by_prompt(request: ModelRequest) -> Any:
    """Answers at once under a brief prompt; otherwise keeps calling `lookup`."""
    if "brief" in request.system.lower():
        return "Short answer."
    return LOOKUPS[sum(1 for m in request.messages if m.role == "tool")]


def review_workflow(model: Any) -> Workflow:
    executor = Agent("Executor", model=model, tools=[lookup])
    return Workflow("review", [loop(steps=[executor], until=until_answered, max_iterations=4)])


VARIANTS = grid(
    prompt={
        "brief": {"Executor": {"system": "Be brief."}},
        "chatty": {"Executor": {"system": "Look everything up."}},
    },
    stop={
        "answered": {"review/0.loop": {"until": until_answered}},
        "three_calls": {"review/0.loop": {"until": max_tool_calls(3)}},
    },
)

EXPECTED = {  # variant -> (stop reason, turns)
    "prompt=brief,stop=answered": ("until", 1),
    "prompt=brief,stop=three_calls": ("exhausted", 4),
    "prompt=chatty,stop=answered": ("exhausted", 4),
    "prompt=chatty,stop=three_calls": ("until", 3),
}


def check_grid(exp: Experiment) -> None:
    assert len(exp.runs) == 12
    keys = [(i, v) for i in INPUTS for v in VARIANTS]
    for (text, variant), run in zip(keys, exp.runs, strict=True):
        assert run.input == text
        assert run.status == "finished"
        assert [n.stop_reason for n in run.loops] == [EXPECTED[variant][0]]
        assert len(run.turns) == EXPECTED[variant][1]
        assert run.workflow is not None and run.workflow.name == "review"
    frame = exp.frame()
    assert list(frame["variant"]) == [v for _, v in keys]
    assert list(frame["stop_reasons"]) == [EXPECTED[v][0] for _, v in keys]


# -- grid ----------------------------------------------------------------------------------


def test_grid_names_each_variant_by_its_axes_and_merges_the_changes() -> None:
    assert list(VARIANTS) == list(EXPECTED)
    assert VARIANTS["prompt=chatty,stop=three_calls"]["Executor"] == {
        "system": "Look everything up."
    }
    assert set(VARIANTS["prompt=brief,stop=answered"]) == {"Executor", "review/0.loop"}
    merged = grid(a={"x": {"Executor": {"system": "s"}}}, b={"y": {"Executor": {"max_tokens": 9}}})
    assert merged == {"a=x,b=y": {"Executor": {"system": "s", "max_tokens": 9}}}


def test_grid_refuses_two_axes_setting_the_same_field() -> None:
    with pytest.raises(ValueError, match=r"two axes set 'Executor'.system"):
        grid(a={"x": {"Executor": {"system": "one"}}}, b={"y": {"Executor": {"system": "two"}}})
    with pytest.raises(ValueError, match="grid axis 'a'"):
        grid(a={})


def test_unknown_agent_in_a_variant_fails_before_any_run() -> None:
    model = FunctionModel(by_prompt)
    with pytest.raises(ValueError, match="Executr"):
        run_experiment(
            review_workflow(model),
            INPUTS,
            variants={"typo": {"Executr": {"system": "x"}}},
            store=False,
            progress=False,
        )
    assert model.requests == []


# -- the local backend -----------------------------------------------------------------------


def test_a_three_by_two_by_two_grid_gives_twelve_runs_with_their_stop_reasons() -> None:
    exp = run_experiment(
        review_workflow(FunctionModel(by_prompt)),
        INPUTS,
        variants=VARIANTS,
        concurrency=4,
        store=MemoryRunStore(),
        progress=False,
    )
    check_grid(exp)
    assert not exp.cancelled and exp.reused == 0


def test_without_variants_every_input_runs_once_as_base() -> None:
    exp = run_experiment(
        review_workflow(ScriptedModel(["done"])), INPUTS, store=False, progress=False
    )
    assert list(exp.frame()["variant"]) == ["base"] * 3
    assert [r.output for r in exp.runs] == ["done"] * 3


def test_equal_variants_and_repeated_inputs_are_separate_runs() -> None:
    script = ScriptedModel([reply.tool("lookup", q="x"), "done"])
    exp = run_experiment(review_workflow(script), ["same", "same"], variants={"a": {}, "b": {}},
                         store=False, progress=False)  # fmt: skip
    assert [r.status for r in exp.runs] == ["finished"] * 4
    assert [len(r.turns) for r in exp.runs] == [2] * 4
    assert len({r.run_id for r in exp.runs}) == 4


def test_running_the_same_experiment_again_reuses_every_finished_run() -> None:
    model = FunctionModel(by_prompt)
    store = MemoryRunStore()
    wf = review_workflow(model)
    first = run_experiment(wf, INPUTS, variants=VARIANTS, store=store, progress=False)
    calls = len(model.requests)
    assert calls == 3 * (1 + 4 + 4 + 3)
    again = run_experiment(wf, INPUTS, variants=VARIANTS, store=store, progress=False)
    assert len(model.requests) == calls  # zero model calls the second time
    assert again.reused == 12
    assert [r.run_id for r in again.runs] == [r.run_id for r in first.runs]
    check_grid(again)


def test_changing_a_variant_runs_it_again() -> None:
    model = FunctionModel(by_prompt)
    store = MemoryRunStore()
    wf = review_workflow(model)
    run_experiment(wf, INPUTS[:1], variants={"v": {"Executor": {"system": "Be brief."}}},
                   store=store, progress=False)  # fmt: skip
    again = run_experiment(wf, INPUTS[:1], variants={"v": {"Executor": {"system": "Brief!"}}},
                           store=store, progress=False)  # fmt: skip
    assert again.reused == 0
    assert len(model.requests) == 2


@pytest.mark.anyio
async def test_cancelling_keeps_the_finished_runs_and_a_rerun_reuses_them() -> None:
    release = asyncio.Event()
    stuck: list[str] = []
    both_stuck = asyncio.Event()

    async def fast_or_stuck(request: ModelRequest) -> str:
        if "slow" in request.messages[0].content and not release.is_set():
            stuck.append(request.messages[0].content)
            if len(stuck) == 2:
                both_stuck.set()
            await release.wait()  # not set before the cancel: these runs are in flight
        return "answer"

    model = FunctionModel(fast_or_stuck)
    store = MemoryRunStore()
    wf = review_workflow(model)
    inputs = ["fast one", "slow one", "fast two", "slow two"]
    task = asyncio.create_task(
        arun_experiment(wf, inputs, concurrency=4, store=store, progress=False)
    )

    async def fast_runs_stored() -> None:
        while len([r for r in store.list_runs() if r["status"] == "finished"]) < 2:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(both_stuck.wait(), 30)  # the slow runs' calls are in flight
    await asyncio.wait_for(fast_runs_stored(), 30)  # a bound, not a speed
    task.cancel()
    with pytest.raises(asyncio.CancelledError) as caught:
        await task
    exp: Experiment = caught.value.experiment  # type: ignore[attr-defined]
    assert exp.cancelled
    assert [r.input for r in exp.runs] == ["fast one", "fast two"]
    assert all(r.status == "finished" for r in exp.runs)
    assert "cancelled" in repr(exp)

    before = len(model.requests)
    release.set()
    again = await arun_experiment(wf, inputs, concurrency=4, store=store, progress=False)
    assert again.reused == 2
    assert [r.input for r in again.runs] == inputs
    asked = [r.messages[0].content for r in model.requests[before:]]
    assert sorted(asked) == ["slow one", "slow two"]  # only the unfinished runs went live


def test_keyboard_interrupt_hands_back_the_experiment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sync form attaches the partial experiment to the interrupt (`exc.experiment`)."""
    import thena_nb.experiments._runner as runner

    def interrupted(coro: Any) -> Any:
        coro.close()
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_sync", interrupted)
    with pytest.raises(KeyboardInterrupt) as caught:
        run_experiment(review_workflow(ScriptedModel(["x"])), INPUTS, store=False, progress=False)
    exp = caught.value.experiment  # type: ignore[attr-defined]
    assert exp.cancelled and exp.runs == []


def test_a_failed_run_is_kept_and_does_not_stop_the_others() -> None:
    def fails_on_bad(request: ModelRequest) -> str:
        if request.messages[0].content == "bad":
            raise RuntimeError("model broke")
        return "fine"

    exp = run_experiment(
        review_workflow(FunctionModel(fails_on_bad)), ["ok", "bad", "ok too"], store=False,
        progress=False,
    )  # fmt: skip
    assert [r.status for r in exp.runs] == ["finished", "failed", "finished"]
    assert "model broke" in (exp.runs[1].error or "")


# -- rate limits -----------------------------------------------------------------------------


def test_a_rate_limit_slows_every_run_instead_of_failing_them() -> None:
    calls: list[float] = []
    limited: list[float] = []

    async def rate_limited_once(request: ModelRequest) -> Any:
        calls.append(time.monotonic())
        await asyncio.sleep(0.01)
        if not limited and len(calls) == 5:
            limited.append(time.monotonic())
            raise TransientModelError("429 too many requests", retry_after=0.3)
        if sum(1 for m in request.messages if m.role == "tool") < 2:
            return reply.tool("lookup", q="x")
        return "answer"

    executor = Agent("Executor", model=FunctionModel(rate_limited_once), tools=[lookup])
    wf = Workflow(
        "limited",
        [loop(steps=[executor], until=until_answered)],
        retry=RetryPolicy(initial_delay=0.01, jitter=False),
    )
    exp = run_experiment(wf, [f"q{i}" for i in range(4)], concurrency=4, store=False,
                         progress=False)  # fmt: skip
    assert [r.status for r in exp.runs] == ["finished"] * 4
    assert exp.slowdowns == 1
    assert sum(t.attempts for r in exp.runs for t in r.turns) == 4 * 3 + 1
    # No run called the model while the gate was closed, not only the one that was limited.
    (t429,) = limited
    during = [t for t in calls if t429 < t < t429 + 0.28]
    assert during == []
    after = [t for t in calls if t >= t429]
    assert len(after) >= 4


def test_the_gated_model_keeps_the_request_keys() -> None:
    """Wrapping models for the rate-limit gate must not change replays: same request keys."""
    wf = review_workflow(ScriptedModel([reply.tool("lookup", q="x"), "done"], name="same"))
    plain = wf.run("question", store=False)
    exp = run_experiment(wf, ["question"], store=False, progress=False)
    assert [t.request_key for t in exp.runs[0].turns] == [t.request_key for t in plain.turns]


# -- frame, compare, display -----------------------------------------------------------------


def test_frame_and_compare_columns() -> None:
    @tool
    def broken(q: str) -> str:
        """Always fails."""
        raise ValueError("no")

    script = ScriptedModel(
        [
            reply.tool("broken", q="a", input_tokens=10, output_tokens=2),
            '<tool_call>{"name": "lookup", "arguments": {"q": "b"}}</tool_call>',
            reply.text("<script>alert(1)</script>", input_tokens=5, output_tokens=1),
        ]
    )
    agent = Agent("Executor", model=script, tools=[lookup, broken])
    wf = Workflow("cols", [loop(steps=[agent], until=until_answered)])
    exp = run_experiment(wf, ["<b>in</b>", "x"], variants={"one": {}, "two": {}}, store=False,
                         progress=False)  # fmt: skip
    frame = exp.frame()
    assert list(frame.columns) == [
        "input", "variant", "status", "error", "stop_reasons", "turns", "tool_calls",
        "rescued", "failures", "input_tokens", "output_tokens", "wall_s", "cost_usd",
        "saved_usd", "reused", "changed",
    ]  # fmt: skip
    row = frame.iloc[0]
    assert (row["input"], row["variant"], row["status"]) == ("<b>in</b>", "one", "finished")
    assert row["error"] is pd.NA
    assert row["stop_reasons"] == "until"
    assert (row["turns"], row["tool_calls"], row["failures"]) == (3, 2, 1)
    assert row["rescued"] == 0.5
    assert (row["input_tokens"], row["output_tokens"]) == (15, 3)
    assert row["wall_s"] >= 0

    compare = exp.compare()
    assert list(compare.index) == ["one", "two"]
    assert list(compare.columns) == [
        "runs", "statuses", "stop_reasons", "errors", "mean_turns", "mean_tool_calls",
        "rescued", "failures", "input_tokens", "output_tokens", "mean_wall_s", "cost_usd",
        "saved_usd",
    ]  # fmt: skip
    one = compare.loc["one"]
    assert (one["runs"], one["statuses"], one["stop_reasons"]) == (2, "finished 2", "until 2")
    assert (one["mean_turns"], one["mean_tool_calls"], one["rescued"]) == (3.0, 2.0, 0.5)
    assert (one["failures"], one["input_tokens"], one["output_tokens"]) == (2, 30, 6)
    assert one["errors"] == 0

    html = exp._repr_html_()
    assert "<script>" not in html and "<b>in</b>" not in html
    assert "cols" in html and "one" in html
    assert repr(exp) == "Experiment('cols', runs=4/4, inputs=2, variants=['one', 'two'])"


def test_a_model_that_raises_shows_its_error_and_counts_as_a_failure() -> None:
    calls = iter(range(100))

    def flaky(request: ModelRequest) -> Any:
        if next(calls) % 2:
            raise RuntimeError("model down")
        return "fine"

    wf = Workflow("e", [Agent("A", model=FunctionModel(flaky))])
    exp = run_experiment(wf, ["a", "b", "c", "d"], concurrency=1, store=False, progress=False)
    frame = exp.frame()
    assert frame["status"].tolist() == ["finished", "failed", "finished", "failed"]
    assert frame["error"].tolist()[1] == "RuntimeError: model down"
    assert frame["failures"].tolist() == [0, 1, 0, 1]
    compare = exp.compare().loc["base"]
    assert (compare["errors"], compare["failures"]) == (2, 2)


def test_variant_names_are_escaped_in_html() -> None:
    exp = run_experiment(
        review_workflow(ScriptedModel(["ok"])), ["q"], variants={"<img src=x>": {}},
        store=False, progress=False,
    )  # fmt: skip
    html = exp._repr_html_()
    assert "<img" not in html and "&lt;img src=x&gt;" in html


def test_progress_bar_counts_every_run(capsys: pytest.CaptureFixture[str]) -> None:
    run_experiment(review_workflow(ScriptedModel(["ok"])), INPUTS, store=False, progress=True)
    err = capsys.readouterr().err
    assert "review" in err and "3/3" in err
    run_experiment(review_workflow(ScriptedModel(["ok"])), INPUTS, store=False, progress=False)
    assert capsys.readouterr().err == ""


# -- the Ray backend -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    """A small Ray instance on this machine, shared by the Ray tests of this module."""
    import ray

    # pytest imports this file under a name Ray's workers cannot import; send its
    # functions by value, as a notebook's or a script's functions are sent.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.ray
def test_ray_backend_gives_the_same_runs_as_the_local_backend(ray_local: Any) -> None:
    wf = review_workflow(FunctionModel(by_prompt))
    store = MemoryRunStore()
    on_ray = run_experiment(wf, INPUTS, variants=VARIANTS, backend="ray", store=store,
                            progress=False)  # fmt: skip
    check_grid(on_ray)
    local = run_experiment(wf, INPUTS, variants=VARIANTS, store=False, progress=False)
    for a, b in zip(on_ray.runs, local.runs, strict=True):
        assert a.run_id == b.run_id
        assert [(t.agent, t.info, t.tool_calls, t.request_key) for t in a.turns] == [
            (t.agent, t.info, t.tool_calls, t.request_key) for t in b.turns
        ]
    # The driver wrote every Ray run to the store, so running again reuses them all.
    again = run_experiment(wf, INPUTS, variants=VARIANTS, backend="ray", store=store,
                           progress=False)  # fmt: skip
    assert again.reused == 12


@pytest.mark.ray
def test_ray_backend_runs_a_scripted_model(ray_local: Any) -> None:
    script = ScriptedModel([reply.tool("lookup", q="x"), "done"])
    exp = run_experiment(review_workflow(script), INPUTS, backend="ray", store=False,
                         progress=False)  # fmt: skip
    assert [r.output for r in exp.runs] == ["done"] * 3
    assert [len(r.turns) for r in exp.runs] == [2] * 3
    assert script.requests == []  # the calls happened in the workers, on copies


@pytest.mark.ray
def test_ray_backend_runs_every_repeat_and_the_driver_scores_them(ray_local: Any) -> None:
    from thena_nb.scorers import stop_reason, tool_trajectory

    wf = review_workflow(FunctionModel(by_prompt))
    scorers = [stop_reason("until"), tool_trajectory(["lookup"], mode="in_order")]
    on_ray = run_experiment(wf, INPUTS[:2], variants=VARIANTS, repeats=2, scorers=scorers,
                            backend="ray", store=False, progress=False)  # fmt: skip
    local = run_experiment(wf, INPUTS[:2], variants=VARIANTS, repeats=2, scorers=scorers,
                           store=False, progress=False)  # fmt: skip
    assert len(on_ray.runs) == 16
    assert [r.run_id for r in on_ray.runs] == [r.run_id for r in local.runs]
    columns = ["variant", "repeat", "stop_reason", "tool_trajectory"]
    assert on_ray.frame()[columns].equals(local.frame()[columns])


def test_ray_backend_without_ray_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r"pip install 'thena_nb\[ray\]'"):
        run_experiment(review_workflow(ScriptedModel(["x"])), ["q"], backend="ray",
                       store=False, progress=False)  # fmt: skip
