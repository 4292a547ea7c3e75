"""Group commit: while several runs write to one SQLite store at once, their writes are
committed together, once per event-loop pass, and each still returns only once committed
(S28: a turn is stored before its run's next turn starts). A lone run commits each turn."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import TURNS_TABLE
from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.core.records.errors import StoreError
from thena_nb.models import FunctionModel, ModelRequest, reply
from thena_nb.store import SqliteRunStore

TURNS = 3


@tool
def lookup(q: str) -> str:
    """Look it up."""
    return f"found {q}"


def committed_turns(path: Path, run_id: str) -> int:
    """Turns of `run_id` another connection sees: committed ones only."""
    with sqlite3.connect(path) as other:
        row = other.execute(f"SELECT count(*) FROM {TURNS_TABLE} WHERE run_id = ?", (run_id,))
        return int(row.fetchone()[0])


def three_turns(
    path: Path,
    seen: list[tuple[str, int, int]],
    before: Callable[[ModelRequest], None] | None = None,
) -> Workflow:
    """Each model call first checks, from another connection, that every earlier turn of
    its run is committed (and calls `before` first, when given)."""

    async def answer(request: ModelRequest) -> object:
        if before is not None:
            before(request)
        run_id = str(request.messages[0].content)  # each run's id is its input
        done = sum(1 for m in request.messages if m.role == "tool")
        seen.append((run_id, done, committed_turns(path, run_id)))
        await asyncio.sleep(0)  # let the other runs write in the same pass
        return reply.tool("lookup", q=str(done)) if done < TURNS - 1 else "done"

    agent = Agent("A", model=FunctionModel(answer), tools=[lookup])
    return Workflow("group", [loop(steps=[agent], until=until_answered, max_iterations=5)])


class Commits:
    """Counts the COMMITs a connection runs."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.count = 0
        conn.set_trace_callback(self)

    def __call__(self, statement: str) -> None:
        self.count += statement.strip().upper() == "COMMIT"


def store_on(path: Path) -> tuple[SqliteRunStore, Commits]:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    return SqliteRunStore(conn), Commits(conn)


def test_concurrent_runs_share_commits_and_every_turn_is_stored_before_the_next(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.sqlite3"
    store, commits = store_on(path)
    seen: list[tuple[str, int, int]] = []
    wf = three_turns(path, seen)
    runs = 20

    async def main() -> list[object]:
        return list(
            await asyncio.gather(
                *(wf.arun(f"q{i}", store=store, run_id=f"q{i}") for i in range(runs))
            )
        )

    before = commits.count
    done = asyncio.run(main())
    assert [r.status for r in done] == ["finished"] * runs  # type: ignore[attr-defined]
    # S28: when turn k's model is called, the run's k earlier turns are committed.
    assert len(seen) == runs * TURNS
    assert all(stored == k for _, k, stored in seen), seen
    for run in done:
        loaded = store.load(run.run_id)  # type: ignore[attr-defined]
        assert [t.index for t in loaded.turns] == list(range(TURNS))
        assert loaded.status == "finished" and loaded.output == "done"
    # One commit per write would be runs * (1 start + 3 turns + 1 end) = 100.
    writes = runs * (TURNS + 2)
    assert commits.count - before < writes / 2, (commits.count - before, writes)
    store.close()


def test_a_lone_run_commits_each_turn_as_before(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    store, commits = store_on(path)
    seen: list[tuple[str, int, int]] = []
    before = commits.count
    run = three_turns(path, seen).run("q", store=store, run_id="q")
    assert run.status == "finished"
    assert [stored for _, _, stored in seen] == [0, 1, 2]
    # Its first turn (with the request parts) is a transaction of its own; its start,
    # every later turn and its end are one statement each, committed on their own (no
    # COMMIT statement).
    assert commits.count - before == 1
    assert not store._batch.loop  # nothing left open
    store.close()


def test_a_write_that_fails_in_a_batch_fails_its_run_alone(tmp_path: Path) -> None:
    """A refused turn (its one INSERT, with no savepoint) is undone alone: the other runs'
    turns of that pass are committed and their runs finish; the refused run raises
    `StoreError`."""
    path = tmp_path / "runs.sqlite3"
    store, _ = store_on(path)
    store._conn.execute(
        "CREATE TEMP TRIGGER refuse BEFORE INSERT ON main.thena_turn_rows WHEN NEW.turn_key = "
        "(SELECT run_no FROM main.thena_runs WHERE run_id = 'bad') * 4294967296 + 1 "
        "BEGIN SELECT RAISE(ABORT, 'refused'); END"
    )
    wf = three_turns(path, [])

    async def main() -> list[object]:
        ids = ["good-1", "bad", "good-2"]
        runs = (wf.arun(i, store=store, run_id=i) for i in ids)
        return list(await asyncio.gather(*runs, return_exceptions=True))

    good_1, bad, good_2 = asyncio.run(main())
    assert isinstance(bad, StoreError) and "refused" in str(bad)
    for run in (good_1, good_2):
        assert store.load(run.run_id).status == "finished"  # type: ignore[attr-defined]
        assert committed_turns(path, run.run_id) == TURNS  # type: ignore[attr-defined]
    assert committed_turns(path, "bad") == 1
    store.close()


def test_a_turn_of_one_statement_joins_the_batch_without_a_savepoint(tmp_path: Path) -> None:
    """Only writes of several statements (a first turn with its request parts) get a
    savepoint; a new run's start, every later turn and its ending are one statement each."""
    path = tmp_path / "runs.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    store, statements = SqliteRunStore(conn), []
    conn.set_trace_callback(statements.append)
    wf, runs = three_turns(path, []), 10

    async def main() -> None:
        await asyncio.gather(*(wf.arun(f"q{i}", store=store, run_id=f"q{i}") for i in range(runs)))

    asyncio.run(main())
    savepoints = sum(s.startswith("SAVEPOINT") for s in statements)
    turns = sum(s.startswith("INSERT OR REPLACE INTO thena_turn_rows") for s in statements)
    assert turns == runs * TURNS
    assert savepoints <= runs, savepoints  # at most a first turn's, with its request parts
    claims = [s for s in statements if s.startswith("INSERT INTO thena_runs")]
    assert len(claims) == runs and not any(s.startswith("SELECT r.status") for s in statements)
    assert sum(s.startswith("UPDATE thena_runs SET status") for s in statements) == runs
    assert all(store.load(f"q{i}").status == "finished" for i in range(runs))
    store.close()


def test_reading_while_a_batch_is_open_commits_it_first(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    store, _ = store_on(path)
    wf = three_turns(path, [])
    listed: list[int] = []

    async def main() -> None:
        async def watch() -> None:
            for _ in range(20):
                listed.append(len(store.list_runs()))  # a read between the writes
                await asyncio.sleep(0)

        await asyncio.gather(
            watch(), *(wf.arun(f"q{i}", store=store, run_id=f"q{i}") for i in range(5))
        )

    asyncio.run(main())
    assert listed and max(listed) == 5
    assert all(r["status"] == "finished" for r in store.list_runs())
    store.close()


@pytest.mark.parametrize("runs", [2, 8])
def test_closing_the_store_commits_an_open_batch(tmp_path: Path, runs: int) -> None:
    path = tmp_path / "runs.sqlite3"
    store, _ = store_on(path)
    wf = three_turns(path, [])

    async def main() -> None:
        await asyncio.gather(*(wf.arun(f"q{i}", store=store, run_id=f"q{i}") for i in range(runs)))

    asyncio.run(main())
    store.close()
    with SqliteRunStore.from_path(path) as again:
        assert [r["status"] for r in again.list_runs()] == ["finished"] * runs


def test_a_claim_made_in_a_batch_still_refuses_a_second_writer(tmp_path: Path) -> None:
    """With other runs live, starts are batched too; two runs with one id: one is refused
    before its first model call, and the other is stored whole."""
    from thena_nb.store import RunInUse

    path = tmp_path / "runs.sqlite3"
    store, _ = store_on(path)
    seen: list[tuple[str, int, int]] = []
    wf = three_turns(path, seen)

    async def main() -> list[object]:
        others = [wf.arun(f"q{i}", store=store, run_id=f"q{i}") for i in range(3)]
        twins = [wf.arun("twin", store=store, run_id="twin") for _ in range(2)]
        return list(await asyncio.gather(*others, *twins, return_exceptions=True))

    *others, a, b = asyncio.run(main())
    refused = [r for r in (a, b) if isinstance(r, RunInUse)]
    assert len(refused) == 1, (a, b)
    assert all(getattr(r, "status", None) == "finished" for r in others)
    assert sum(1 for run_id, _, _ in seen if run_id == "twin") == TURNS  # one writer called
    assert store.load("twin").status == "finished"
    assert committed_turns(path, "twin") == TURNS
    store.close()


@pytest.mark.filterwarnings("ignore:thena_nb.*could not be stored:RuntimeWarning")
def test_a_batch_rolled_back_under_its_writers_fails_them_all(tmp_path: Path) -> None:
    """If the open transaction is gone before its commit (SQLite rolls a transaction back
    on some errors), no writer of it is told its write is stored: each run raises."""
    path = tmp_path / "runs.sqlite3"
    store, _ = store_on(path)

    def rolls_back(request: ModelRequest) -> None:
        if request.messages[0].content == "q1" and store._batch.loop is not None:
            store._conn.execute("ROLLBACK")  # as SQLite does after a disk I/O error

    wf = three_turns(path, [], rolls_back)

    async def main() -> list[object]:
        runs = (wf.arun(f"q{i}", store=store, run_id=f"q{i}") for i in range(4))
        return list(await asyncio.gather(*runs, return_exceptions=True))

    done = asyncio.run(main())
    failed = [r for r in done if isinstance(r, StoreError)]
    assert failed and all("rolled back" in str(e) for e in failed)
    for i, r in enumerate(done):
        if not isinstance(r, BaseException):
            assert committed_turns(path, f"q{i}") == TURNS  # what it was told is stored
    store.close()
