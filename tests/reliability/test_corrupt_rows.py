"""19 #20: a corrupt stored row raises `StoreError` naming the run, and an experiment that
would reuse it runs that case afresh, with a warning."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.helpers import turn_rows_where
from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.core.records.errors import StoreError
from thena_nb.experiments import run_experiment
from thena_nb.models import FunctionModel, reply
from thena_nb.store import SqliteRunStore


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _answer(request: object) -> object:
    done = any(m.role == "tool" for m in request.messages)  # type: ignore[attr-defined]
    return "three" if done else reply.tool("add", a=1, b=2)


def adder() -> Workflow:
    agent = Agent("A", model=FunctionModel(_answer, name="adder"), tools=[add])
    return Workflow("adder", [loop(steps=[agent], until=until_answered)])


_TURN = "UPDATE thena_turn_rows SET turn = '{}' WHERE " + turn_rows_where("idx = {}")
CORRUPTIONS = {
    "turn JSON": _TURN.format('{"index": ', 1),
    "turn fields": _TURN.format('{"index": "x"}', 0),
    "history": "UPDATE thena_runs SET history = '[{\"role\": 7}]'",
    "usage": "UPDATE thena_runs SET usage = 'not json'",
    "report": "UPDATE thena_runs SET report = '[]'",
    "request part": "UPDATE thena_request_parts SET value = '{'",
}


def _corrupt(path: Path, statement: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute(statement)
    conn.commit()
    conn.close()


@pytest.mark.parametrize("what", list(CORRUPTIONS))
def test_a_corrupt_row_raises_store_error_naming_the_run(what: str, tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    with SqliteRunStore.from_path(path) as store:
        adder().run("go", run_id="bad-run", store=store)
        _corrupt(path, CORRUPTIONS[what])
        with pytest.raises(StoreError, match=r"run 'bad-run' in .* is corrupt") as info:
            store.load("bad-run")
        assert "store.delete('bad-run')" in str(info.value)
        assert isinstance(info.value.__cause__, ValueError | TypeError | KeyError)


def test_a_corrupt_listing_row_names_its_run(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    with SqliteRunStore.from_path(path) as store:
        adder().run("go", run_id="bad-row", store=store)
        _corrupt(path, "UPDATE thena_runs SET started_at = 'yesterday'")
        with pytest.raises(StoreError, match=r"run 'bad-row' .* is corrupt"):
            store.list_runs()


def test_an_experiment_runs_a_corrupt_stored_case_afresh_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    with SqliteRunStore.from_path(path) as store:
        first = run_experiment(adder(), ["a", "b", "c"], store=store, progress=False)
        bad = first.runs[1].run_id
        where = turn_rows_where(f"run_id = '{bad}'")
        _corrupt(path, f"UPDATE thena_turn_rows SET turn = 'garbage' WHERE {where}")
        with pytest.warns(RuntimeWarning, match=rf"stored run '{bad}' cannot be reused"):
            again = run_experiment(adder(), ["a", "b", "c"], store=store, progress=False)
        assert again.reused == 2
        assert [r.run_id for r in again.runs] == [r.run_id for r in first.runs]
        assert [r.status for r in again.runs] == ["finished"] * 3
        assert store.load(bad).output == "three"  # stored afresh, readable again
