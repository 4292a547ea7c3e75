"""Turns keyed by their run's number (`thena_turn_rows`): a turn's commit writes one B-tree
page, an older file's turns move there when it is opened for writing (and are read where
they are when it cannot be written), and a run number is never given twice."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import TURNS_TABLE
from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.core.records.errors import StoreError
from thena_nb.core.records.model import ModelRequest
from thena_nb.core.store import sqlite as sqlite_store
from thena_nb.core.store._sqlite_file import OLD_TURNS, open_read_only, turn_key
from thena_nb.models import FunctionModel, reply
from thena_nb.store import SqliteRunStore

OLD_TABLE = f"""CREATE TABLE {OLD_TURNS} (
    run_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    format INTEGER NOT NULL,
    request_key TEXT,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    turn TEXT NOT NULL,
    state TEXT,
    messages TEXT NOT NULL,
    PRIMARY KEY (run_id, idx)
)"""
"""The turn table as files written before `thena_turn_rows` have it."""


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def counting(n: int, *, hook: Any = None) -> Workflow:
    """A loop of `n` turns: `n - 1` calls of `add`, then the answer."""

    def decide(request: ModelRequest) -> Any:
        done = sum(m.role == "tool" for m in request.messages)
        if hook is not None:
            hook(done)
        if done < n - 1:
            return reply.tool("add", a=done, b=1)
        return reply.text(f"done after {done}")

    agent = Agent("Calc", model=FunctionModel(decide, name="counting"), tools=[add])
    return Workflow("count", [loop(steps=[agent], until=until_answered, max_iterations=n + 5)])


def as_older_file(path: Path) -> None:
    """Rewrite a store file the way an older version laid it out: turns in `OLD_TURNS`,
    keyed by run id and index, no run numbers, every row of format 1."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE thena_runs SET format = 1")
        conn.execute("UPDATE thena_turn_rows SET format = 1")
        conn.execute(OLD_TABLE)
        conn.execute(
            f"INSERT INTO {OLD_TURNS} SELECT run_id, idx, format, request_key, "
            f"input_tokens, output_tokens, turn, state, messages FROM {TURNS_TABLE}"
        )
        conn.execute("DROP TABLE thena_turn_rows")
        conn.execute("DROP INDEX thena_runs_no")
        conn.execute("ALTER TABLE thena_runs DROP COLUMN run_no")
    conn.close()


def tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def numbers(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT run_id, run_no FROM thena_runs").fetchall())


def same_runs(a: Any, b: Any) -> None:
    """The same turns (a resume's returned run marks the turns it replayed; the store keeps
    them as they first happened), history, status and output."""
    dump = {"exclude": {"replayed"}}
    assert [t.model_dump(**dump) for t in a.turns] == [t.model_dump(**dump) for t in b.turns]
    assert a.history == b.history and a.status == b.status and a.output == b.output


def test_a_turn_row_is_keyed_by_its_run_number_and_index_and_the_table_has_no_index(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite3"
    with SqliteRunStore.from_path(path) as store:
        first, second = counting(3).run("a", store=store), counting(2).run("b", store=store)
    nos = numbers(path)
    assert nos[first.run_id] != nos[second.run_id]
    with sqlite3.connect(path) as conn:
        keys = [k for (k,) in conn.execute("SELECT turn_key FROM thena_turn_rows ORDER BY 1")]
        indexes = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'thena_turn_rows'"
        ).fetchall()
    assert keys == sorted(
        [turn_key(nos[first.run_id], i) for i in range(3)]
        + [turn_key(nos[second.run_id], i) for i in range(2)]
    )
    assert indexes == []  # one B-tree: a turn's commit writes one page of it


def test_loading_and_listing_find_a_runs_turns_by_a_range_of_keys(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    SqliteRunStore(path).close()
    with sqlite3.connect(path) as conn:
        plans = [
            " ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {query}", args))
            for query, args in [
                (sqlite_store._SELECT_TURNS.format("t.messages"), ("r",)),
                (sqlite_store._LIST, ()),
                (sqlite_store._DELETE_FROM, (0, 1)),
            ]
        ]
    for plan in plans:  # never a scan of every turn
        assert "USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)" in plan, plan


def test_an_older_file_opened_for_writing_moves_its_turns_and_loads_the_same(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite3"
    with SqliteRunStore.from_path(path) as store:
        runs = [counting(n).run(f"run {n}", store=store) for n in (1, 3, 5)]
        listed = store.list_runs()
    as_older_file(path)
    assert OLD_TURNS in tables(path) and "thena_turn_rows" not in tables(path)
    with SqliteRunStore.from_path(path) as store:
        for run in runs:
            same_runs(store.load(run.run_id), run)
        assert store.list_runs() == listed
        later = counting(2).run("later", store=store)
        assert len(store.load(later.run_id).turns) == 2
    assert OLD_TURNS not in tables(path)
    nos = numbers(path)
    assert len(set(nos.values())) == 4 and nos[later.run_id] == max(nos.values())


def test_an_older_files_unfinished_run_resumes_after_the_move(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    calls: list[int] = []

    def stop_at_three(done: int) -> None:
        calls.append(done)
        if done == 3 and len(calls) == 4:
            raise RuntimeError("the model went away")

    with SqliteRunStore.from_path(path) as store:
        wf = counting(6, hook=stop_at_three)
        with pytest.raises(RuntimeError, match="went away"):
            wf.run("go", store=store)
        (failed,) = store.list_runs()
        assert failed["status"] == "failed" and failed["turns"] == 3
        stored = store.load(failed["run_id"]).turns
    as_older_file(path)
    with SqliteRunStore.from_path(path) as store:
        calls.clear()
        resumed = wf.resume(failed["run_id"], store=store)
        assert resumed.status == "finished" and len(resumed.turns) == 6
        assert calls == [3, 4, 5]  # the three stored turns replayed, no model call
        kept = store.load(failed["run_id"])
        assert kept.status == "finished" and kept.history == resumed.history
        assert kept.turns[:3] == stored and kept.turns[3:] == resumed.turns[3:]


def test_an_older_file_that_cannot_be_written_is_read_where_its_turns_are(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite3"
    with SqliteRunStore.from_path(path) as store:
        runs = [counting(n).run(f"run {n}", store=store) for n in (2, 4)]
        listed = store.list_runs()
    as_older_file(path)
    before = path.read_bytes()
    conn = open_read_only(path, repr(str(path)))
    store = SqliteRunStore(conn)
    try:
        assert store.read_only
        for run in runs:
            same_runs(store.load(run.run_id), run)
        assert store.list_runs() == listed
        with pytest.raises(StoreError, match="read-only"):
            counting(1).run("no", store=store)
    finally:
        store.close()
        conn.close()
    assert path.read_bytes() == before and OLD_TURNS in tables(path)


def test_a_deleted_runs_number_is_never_given_again(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    with SqliteRunStore.from_path(path) as store:
        a, b = counting(2).run("a", store=store), counting(2).run("b", store=store)
        highest = numbers(path)[b.run_id]
        store.delete(b.run_id)
    with SqliteRunStore.from_path(path) as store:  # (the freed number is kept in the file)
        c = counting(2).run("c", store=store)
        assert numbers(path)[c.run_id] > highest
        assert [t.index for t in store.load(c.run_id).turns] == [0, 1]
        assert [t.index for t in store.load(a.run_id).turns] == [0, 1]


def test_a_run_deleted_while_it_runs_never_puts_turns_into_a_run_that_came_after(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite3"
    later: list[Any] = []

    def meanwhile(done: int) -> None:
        if done == 1 and not later:  # another process deletes this run, another one starts
            with SqliteRunStore.from_path(path) as other:
                other.delete(other.list_runs()[0]["run_id"])

            def run_other() -> None:
                with SqliteRunStore.from_path(path) as third:
                    later.append(counting(3).run("after", store=third))

            thread = threading.Thread(target=run_other)
            thread.start()
            thread.join()

    with SqliteRunStore.from_path(path) as store:
        first = counting(4, hook=meanwhile).run("first", store=store)
        assert first.status == "finished"
        after = store.load(later[0].run_id)
        assert [t.index for t in after.turns] == [0, 1, 2]
        same_runs(after, later[0])
        kept = store.load(first.run_id)  # back when it ended, with the turns it wrote since
        assert [t.index for t in kept.turns] == [1, 2, 3]
    nos = numbers(path)
    assert nos[first.run_id] != nos[later[0].run_id]


def test_request_parts_written_again_by_later_runs_load_as_each_run_saw_them(
    tmp_path: Path,
) -> None:
    with SqliteRunStore(tmp_path / "runs.sqlite3") as store:
        wf = counting(2)
        first, second = wf.run("a", store=store), wf.run("b", store=store)
        for run in (first, second):
            loaded = store.load(run.run_id)
            assert loaded.request_parts == run.request_parts and len(run.request_parts) == 2
            assert loaded.request_of(loaded.turns[1]) == run.request_of(run.turns[1])


def test_a_part_text_is_reused_only_for_the_very_value_it_was_made_from() -> None:
    spec = [{"name": "add", "parameters": {"type": "object"}}]
    ((_, _, text),) = sqlite_store._part_rows("r1", {"t1": spec}, ["t1"])
    ((_, _, again),) = sqlite_store._part_rows("r2", {"t1": spec}, ["t1"])
    assert again is text  # the same object: its text is not made again
    other = [{"name": "sub", "parameters": {"type": "object"}}]  # same key, another value
    ((_, _, changed),) = sqlite_store._part_rows("r3", {"t1": other}, ["t1"])
    assert '"sub"' in changed and '"add"' not in changed
