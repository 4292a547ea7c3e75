"""A run's ending in SQLite: a run this store made writes only its ending; one that was
there before (a resume, a run id given again) also has its stale rows cleaned up; and an
ending whose row vanished meanwhile is written whole all the same."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from thena_nb import Agent, Workflow, loop, parallel, tool, until_answered
from thena_nb.models import FunctionModel, ModelRequest, ScriptedModel, reply
from thena_nb.store import SqliteRunStore


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def two_turns() -> Workflow:
    model = ScriptedModel([reply.tool("add", a=1, b=2), "three"])
    agent = Agent("A", model=model, tools=[add])
    return Workflow("ending", [loop(steps=[agent], until=until_answered)])


class Statements:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.seen: list[str] = []
        conn.set_trace_callback(self.seen.append)


def test_a_new_run_ends_with_its_ending_alone(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "runs.sqlite3", isolation_level=None)
    store, trace = SqliteRunStore(conn), Statements(conn)
    run = two_turns().run("go", store=store, run_id="new")
    last = max(i for i, sql in enumerate(trace.seen) if "INTO thena_turn_rows" in sql)
    ending = [sql.split()[0] for sql in trace.seen[last + 1 :]]
    assert ending == ["UPDATE"], trace.seen[last + 1 :]  # its own transaction: no BEGIN
    loaded = store.load(run.run_id)
    assert loaded.status == "finished" and [t.index for t in loaded.turns] == [0, 1]


def test_a_new_run_is_claimed_by_one_statement(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "runs.sqlite3", isolation_level=None)
    store = SqliteRunStore(conn)
    two_turns().run("go", store=store, run_id="first")
    trace = Statements(conn)
    two_turns().run("go", store=store, run_id="second")
    first = min(i for i, sql in enumerate(trace.seen) if "thena_request_parts" in sql)
    claim = [sql for sql in trace.seen[:first] if sql != "BEGIN IMMEDIATE"]  # (the turn's)
    assert len(claim) == 1 and claim[0].startswith("INSERT INTO thena_runs"), claim
    numbers = dict(conn.execute("SELECT run_id, run_no FROM thena_runs").fetchall())
    assert numbers["second"] == numbers["first"] + 1
    assert [t.index for t in store.load("second").turns] == [0, 1]


def test_without_returning_a_new_run_is_claimed_as_any_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An SQLite older than 3.35 has no `RETURNING`: the claim then selects and inserts."""
    import thena_nb.core.store.sqlite as sqlite_store

    monkeypatch.setattr(sqlite_store, "_RETURNING", False)
    conn = sqlite3.connect(tmp_path / "runs.sqlite3", isolation_level=None)
    store, trace = SqliteRunStore(conn), Statements(conn)
    two_turns().run("go", store=store, run_id="old")
    assert not any("RETURNING" in sql for sql in trace.seen)
    assert any(sql.startswith("SELECT r.status") for sql in trace.seen)
    loaded = store.load("old")
    assert loaded.status == "finished" and [t.index for t in loaded.turns] == [0, 1]


def test_a_claim_never_reuses_a_deleted_runs_number(tmp_path: Path) -> None:
    with SqliteRunStore.from_path(tmp_path / "runs.sqlite3") as store:
        wf = two_turns()
        wf.run("go", store=store, run_id="a")
        wf.run("go", store=store, run_id="b")
        store.delete("b")
        wf.run("go", store=store, run_id="c")
        assert [t.index for t in store.load("a").turns] == [0, 1]  # not c's turns
        assert [t.index for t in store.load("c").turns] == [0, 1]
        numbers = dict(store._conn.execute("SELECT run_id, run_no FROM thena_runs").fetchall())
        assert numbers["c"] > numbers["a"] + 1


def test_a_run_id_given_again_has_its_stale_turns_removed(tmp_path: Path) -> None:
    with SqliteRunStore.from_path(tmp_path / "runs.sqlite3") as store:
        long = Workflow(
            "ending",
            [Agent("A", model=ScriptedModel(["one"])), Agent("B", model=ScriptedModel(["two"]))],
        )
        long.run("go", store=store, run_id="again")
        assert len(store.load("again").turns) == 2
        short = Workflow("ending", [Agent("A", model=ScriptedModel(["only"]))])
        short.run("go", store=store, run_id="again", overwrite=True)
        loaded = store.load("again")
        assert [t.info.response for t in loaded.turns] == ["only"]
        assert loaded.output == "only"


def test_an_ending_whose_row_vanished_is_written_whole(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"

    def answer(request: ModelRequest) -> object:
        if not any(m.role == "tool" for m in request.messages):
            return reply.tool("add", a=1, b=2)
        with sqlite3.connect(path) as other:  # someone deletes the run's row meanwhile
            other.execute("DELETE FROM thena_runs WHERE run_id = 'gone'")
        return "done"

    agent = Agent("A", model=FunctionModel(answer), tools=[add])
    wf = Workflow("ending", [loop(steps=[agent], until=until_answered)])
    with SqliteRunStore.from_path(path) as store:
        wf.run("go", store=store, run_id="gone")
        loaded = store.load("gone")
        assert loaded.status == "finished" and loaded.output == "done"
        assert [t.index for t in loaded.turns] == [0, 1]


def test_a_new_run_with_a_parallel_block_leaves_no_branch_turns(tmp_path: Path) -> None:
    a = Agent("A", model=ScriptedModel(["a"]))
    b = Agent("B", model=ScriptedModel(["b"]))
    wf = Workflow("ending", [parallel([a, b])])
    with SqliteRunStore.from_path(tmp_path / "runs.sqlite3") as store:
        wf.run("go", store=store, run_id="par")
        assert store.load("par").status == "finished"
    with sqlite3.connect(tmp_path / "runs.sqlite3") as conn:
        left = conn.execute("SELECT count(*) FROM thena_branch_turns").fetchone()[0]
    assert left == 0
