"""An experiment keeps a summary per run, not the runs: `exp.runs` loads them from the store
(unless `keep_runs=True`, or there is no store), and frames, scores, rescoring and diffs
still work."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.core.runs.run import Run
from thena_nb.experiments import run_experiment
from thena_nb.experiments.cases import Case
from thena_nb.models import FunctionModel, ModelRequest, reply
from thena_nb.scorers import contains
from thena_nb.store import MemoryRunStore

INPUTS = ["alpha", "beta", "gamma"]
VARIANTS = {"plain": {}, "brief": {"A": {"system": "Be brief."}}}


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


LOOKUP = reply.tool("lookup", q="x")


def answer(request: ModelRequest) -> Any:
    """One lookup, then the input back."""
    if not any(m.role == "tool" for m in request.messages):
        return LOOKUP
    return f"answer to {request.messages[0].content}"


def workflow() -> Workflow:
    agent = Agent("A", model=FunctionModel(answer), tools=[lookup])
    return Workflow("sums", [loop(steps=[agent], until=until_answered)])


class Watcher:
    """A scorer that keeps a weak reference to every run it scores."""

    __name__ = "watched"

    def __init__(self) -> None:
        self.refs: list[weakref.ref[Run]] = []

    def __call__(self, run: Run, case: Case) -> bool:
        self.refs.append(weakref.ref(run))
        return run.status == "finished"

    def alive(self) -> int:
        gc.collect()
        return sum(ref() is not None for ref in self.refs)


def test_with_a_store_the_experiment_keeps_no_run_and_loads_them_from_the_store() -> None:
    store, watched = MemoryRunStore(), Watcher()
    exp = run_experiment(workflow(), INPUTS, variants=VARIANTS, store=store, scorers=[watched],
                         progress=False)  # fmt: skip
    assert not exp.keep_runs
    assert watched.alive() == 0  # every run it made is gone once scored and stored
    runs = exp.runs  # loaded now, from the store
    assert [r.run_id for r in runs] == exp.run_ids
    assert [r.output for r in runs] == [f"answer to {i}" for i in INPUTS for _ in VARIANTS]
    assert all(r.workflow is not None and r.workflow.name == "sums" for r in runs)
    frame = exp.frame()
    assert list(frame["status"]) == ["finished"] * 6
    assert list(frame["turns"]) == [2] * 6 and list(frame["tool_calls"]) == [1] * 6
    assert list(frame["watched"]) == [True] * 6


def test_keep_runs_true_keeps_the_very_runs_that_ended() -> None:
    watched = Watcher()
    exp = run_experiment(workflow(), INPUTS, store=MemoryRunStore(), keep_runs=True,
                         scorers=[watched], progress=False)  # fmt: skip
    assert exp.keep_runs and watched.alive() == 3
    assert [r.run_id for r in exp.runs] == [ref().run_id for ref in watched.refs]  # type: ignore[union-attr]
    assert all(run is exp.runs[i] for i, run in enumerate(exp.runs))


def test_without_a_store_the_runs_are_kept() -> None:
    exp = run_experiment(workflow(), INPUTS, store=False, progress=False)
    assert exp.keep_runs
    assert [r.output for r in exp.runs] == [f"answer to {i}" for i in INPUTS]


def test_keep_runs_false_without_a_store_gives_rows_and_says_how_to_keep_runs() -> None:
    exp = run_experiment(workflow(), INPUTS, store=False, keep_runs=False, progress=False)
    assert list(exp.frame()["status"]) == ["finished"] * 3
    assert len(exp.run_ids) == 3
    with pytest.raises(ValueError, match="keep_runs=True"):
        exp.runs  # noqa: B018


def test_rescore_and_diff_load_the_runs_they_need_from_the_store() -> None:
    exp = run_experiment(workflow(), ["alpha"], variants=VARIANTS, store=MemoryRunStore(),
                         progress=False)  # fmt: skip
    again = exp.rescore({"alpha": contains("alpha")})
    assert list(again.frame()["alpha"]) == [True, True]
    assert again.compare().loc["plain", "alpha"] == 1.0
    assert exp.diff("plain", "brief").first_divergence.changed == ("system",)


def test_reused_runs_are_summarised_without_being_kept() -> None:
    store = MemoryRunStore()
    first = run_experiment(workflow(), INPUTS, store=store, progress=False)
    watched = Watcher()
    again = run_experiment(workflow(), INPUTS, store=store, scorers=[watched], progress=False)
    assert again.reused == 3 and watched.alive() == 0
    assert again.run_ids == first.run_ids
    assert list(again.frame()["cost_usd"]) == [0.0] * 3
    assert list(again.frame()["watched"]) == [True] * 3


def test_an_async_scorer_scores_each_run_as_it_ends() -> None:
    async def slow_check(run: Run, case: Case) -> bool:
        return str(run.output).startswith("answer")

    exp = run_experiment(workflow(), INPUTS, store=MemoryRunStore(), scorers=[slow_check],
                         progress=False)  # fmt: skip
    assert list(exp.frame()["slow_check"]) == [True] * 3
