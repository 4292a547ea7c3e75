"""Issue 41 #3: a run an experiment takes from the store again is summarised from its stored
rows (`SqliteRunStore.summaries`, in bulk), not loaded: its row of `exp.frame()` is the live
run's (but for `reused`, `changed` and the cost it did not make again), and `exp.runs` still
loads each run in full, turns and all, when it is read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from thena_nb import Agent, Budget, Workflow, loop, tool, until_answered
from thena_nb.core.runs.run import Run
from thena_nb.experiments import Experiment, run_experiment
from thena_nb.experiments._rows import facts_from_summary, facts_of
from thena_nb.models import FunctionModel, ModelRequest, reply
from thena_nb.store import SqliteRunStore

INPUTS = ["plain", "rescue", "pay 50", "pay 500"]
VARIANTS: dict[str, Any] = {
    "free": {},
    "tight": {"rows": {"budget": Budget(max_tool_calls=1)}},
}
"""`tight` stops runs at their second tool call (status `budget`)."""
APART = ["reused", "changed", "cost_usd", "saved_usd"]
"""The columns where a reused run's row differs from the live one's, by design."""


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@tool
def broken(q: str) -> str:
    """Always fails."""
    raise ValueError("no")


@tool(gate=lambda call: call.arguments["amount"] > 100)
def pay(amount: int) -> str:
    """Pay an amount (over 100 waits for a decision)."""
    return f"paid {amount}"


def worker(request: ModelRequest) -> Any:
    """First a call that depends on the input (a failing one, one written in text, a
    payment), then a lookup, then an answer; later iterations answer at once."""
    done = sum(1 for m in request.messages if m.role == "tool")
    text = str(request.messages[0].content)
    if done == 0 and text == "rescue":
        return '<tool_call>{"name": "lookup", "arguments": {"q": "b"}}</tool_call>'
    if done == 0 and text.startswith("pay "):
        return reply.tool("pay", amount=int(text.split()[1]))
    if done == 0:
        return reply.tool("broken", q="a", input_tokens=10, output_tokens=2)
    if done == 1:
        return reply.tool("lookup", q="x", input_tokens=3, output_tokens=1)
    return reply.text(f"answer to {text}", input_tokens=5, output_tokens=1)


def workflow() -> Workflow:
    """An outer loop of two iterations around an inner loop: three loop nodes per run."""
    agent = Agent("Worker", model=FunctionModel(worker), tools=[lookup, broken, pay])
    inner = loop(steps=[agent], until=until_answered, max_iterations=4)
    outer = loop(steps=[inner], until=lambda ctx: False, max_iterations=2)
    return Workflow("rows", [outer])


def experiment(store: Any, **options: Any) -> Experiment:
    return run_experiment(workflow(), INPUTS, variants=VARIANTS, repeats=2, store=store,
                          progress=False, **options)  # fmt: skip


class CountingStore(SqliteRunStore):
    """Counts the runs loaded."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.loaded: list[str] = []

    def load(self, run_id: str) -> Run:
        self.loaded.append(run_id)
        return super().load(run_id)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with CountingStore(tmp_path / "runs.sqlite3") as store:
        yield store


def test_the_workflow_makes_every_kind_of_row(store: CountingStore) -> None:
    """What the comparisons below cover: every reusable status, failed and rescued calls,
    tokens, several loop nodes, repeats."""
    frame = experiment(store).frame()
    assert set(frame["status"]) == {"finished", "waiting", "budget"}
    assert frame["failures"].max() >= 1 and frame["rescued"].max() > 0
    assert frame["input_tokens"].max() > 0
    assert any(str(s).count(",") >= 2 for s in frame["stop_reasons"])
    assert "waiting" in ",".join(map(str, frame["stop_reasons"]))
    assert set(frame["repeat"]) == {0, 1}


def test_reused_rows_are_the_live_rows(store: CountingStore) -> None:
    live = experiment(store)
    store.loaded.clear()
    again = experiment(store)
    assert again.reused == len(live.run_ids) == 16
    assert store.loaded == []  # summarised, none loaded
    assert again.run_ids == live.run_ids
    before, after = live.frame(), again.frame()
    assert list(after.columns) == list(before.columns)
    pd.testing.assert_frame_equal(after.drop(columns=APART), before.drop(columns=APART))
    assert after["reused"].all() and not before["reused"].any()
    assert list(after["changed"]) == [""] * 16
    assert list(after["cost_usd"]) == [0.0] * 16  # this experiment made none of its calls
    assert list(after["saved_usd"]) == list(before["saved_usd"] + before["cost_usd"].fillna(0))
    pd.testing.assert_frame_equal(again.compare().drop(columns=["cost_usd", "saved_usd"]),
                                  live.compare().drop(columns=["cost_usd", "saved_usd"]))  # fmt: skip


def test_summarised_rows_are_the_rows_of_the_loaded_runs(store: CountingStore) -> None:
    """The same re-run keeping its runs loads each one instead: the same frame."""
    experiment(store)
    summarised = experiment(store)
    store.loaded.clear()
    loaded = experiment(store, keep_runs=True)
    assert sorted(store.loaded) == sorted(loaded.run_ids)
    pd.testing.assert_frame_equal(summarised.frame(), loaded.frame())


def test_a_summary_gives_the_facts_of_the_loaded_run(store: CountingStore) -> None:
    ids = experiment(store).run_ids
    summaries = store.summaries([*ids, "not-stored"])
    assert sorted(summaries) == sorted(ids)
    for run_id in ids:
        assert facts_from_summary(summaries[run_id]) == facts_of(store.load(run_id))


def test_runs_after_a_fully_reused_rerun_are_full_runs_loaded_when_read(
    store: CountingStore,
) -> None:
    live = experiment(store, keep_runs=True)
    again = experiment(store)
    assert again.reused == 16 and not again.keep_runs and store.loaded == []
    runs = again.runs
    assert store.loaded == again.run_ids  # loaded now, each as it is read
    assert [r.run_id for r in runs] == [r.run_id for r in live.runs]
    assert sum(len(r.turns) for r in runs) > 16  # (a waiting run has none yet)
    for run, first in zip(runs, live.runs, strict=True):
        assert run.status == first.status and run.output == first.output
        assert [t.model_dump() for t in run.turns] == [t.model_dump() for t in first.turns]
        assert [m.model_dump() for m in run.history] == [m.model_dump() for m in first.history]
        assert [run.request_of(t) for t in run.turns] == [
            first.request_of(t) for t in first.turns
        ]  # what each model call was sent
        assert [p.call for p in run.pending] == [p.call for p in first.pending]
        assert run.workflow is not None and run.workflow.name == "rows"


def test_a_scored_rerun_loads_the_runs_its_scorers_need(store: CountingStore) -> None:
    experiment(store)
    store.loaded.clear()
    scored = experiment(store, scorers={"n_turns": lambda run, case: len(run.turns)})
    assert scored.reused == 16 and sorted(store.loaded) == sorted(scored.run_ids)
    frame = scored.frame()
    assert list(frame["n_turns"]) == list(frame["turns"]) and frame["reused"].all()


def test_a_run_that_cannot_be_summarised_is_loaded(store: CountingStore) -> None:
    ids = experiment(store).run_ids
    real = store.summaries

    def some(run_ids: Any) -> dict[str, dict[str, Any]]:
        out = real(run_ids)
        out.pop(ids[0], None)  # as if unreadable this way
        out[ids[1]] = {**out[ids[1]], "usage": {"input_tokens": "many"}}  # a bad one
        return out

    store.summaries = some  # type: ignore[method-assign]
    store.loaded.clear()
    again = experiment(store)
    assert again.reused == 16 and sorted(store.loaded) == sorted(ids[:2])
