"""19 #3: a failed final store write is never silent, and a run whose writer is gone shows
as `abandoned`, not `running` for ever."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.core.records.errors import StoreError
from thena_nb.models import ScriptedModel, reply
from thena_nb.store import ABANDONED, RunInUse, SqliteRunStore


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def small() -> Workflow:
    model = ScriptedModel([reply.tool("add", a=1, b=2), "three"])
    return Workflow("w", [loop(steps=[Agent("A", model=model, tools=[add])], until=until_answered)])


def _refuse(path: Path, trigger: str) -> None:
    """A real failure of the final write: the database refuses the update (as a full disk
    or a lost file would), through a trigger."""
    conn = sqlite3.connect(path)
    conn.execute(
        f"CREATE TRIGGER refuse BEFORE UPDATE {trigger} ON thena_runs "
        "BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END"
    )
    conn.commit()
    conn.close()


def test_a_failed_final_write_raises_warns_and_marks_the_run_failed(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    with SqliteRunStore.from_path(path) as store:
        _refuse(path, "OF history")  # the ending cannot be written; a small update can
        with (
            pytest.warns(RuntimeWarning, match=r"is not complete in SqliteRunStore"),
            pytest.raises(StoreError, match="cannot finish run .*disk I/O error") as info,
        ):
            small().run("go", run_id="r1", store=store)
        assert info.value.run.status == "finished"  # type: ignore[attr-defined]
        (row,) = store.list_runs()
        assert row["status"] == "failed" and row["turns"] == 2
        assert "the run's ending could not be stored" in row["error"]
        # Its turns are kept: a resume finishes it without calling anything again.
        sqlite3.connect(path).execute("DROP TRIGGER refuse").connection.commit()
        resumed = small().resume("r1", store=store)
        assert resumed.status == "finished" and all(t.replayed for t in resumed.turns)
        assert store.load("r1").status == "finished"


def test_a_run_whose_ending_cannot_be_written_at_all_shows_as_abandoned(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    with SqliteRunStore.from_path(path) as store, SqliteRunStore.from_path(path) as reader:
        _refuse(path, "OF status")  # nor can the run be marked failed
        with pytest.warns(RuntimeWarning), pytest.raises(StoreError, match="cannot finish"):
            small().run("go", run_id="r2", store=store)
        assert [r["status"] for r in store.list_runs()] == [ABANDONED]
        assert reader.load("r2").status == ABANDONED and len(reader.load("r2").turns) == 2
        assert store.statuses(["r2", "nope"]) == {"r2": ABANDONED}


def _owned_by(path: Path, owner: str, lease_until: float | None) -> None:
    """A run left `running` by a writer elsewhere, as its row says."""
    with SqliteRunStore.from_path(path) as store:
        small().run("go", run_id="elsewhere", store=store)
    conn = sqlite3.connect(path)
    conn.execute(
        "UPDATE thena_runs SET status = 'running', finished_at = NULL, history = NULL, "
        "report = NULL, owner = ?, lease_until = ?",
        (owner, lease_until),
    )
    conn.commit()
    conn.close()


def test_a_writer_on_another_host_holds_its_run_while_its_lease_lasts(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    _owned_by(path, "another-host:4242:abcd1234", time.time() + 3600)
    with SqliteRunStore.from_path(path) as store:
        assert store.list_runs()[0]["status"] == "running"
        with pytest.raises(RunInUse, match=r"by process 4242 on 'another-host'"):
            small().run("go", run_id="elsewhere", store=store)
        assert store.load("elsewhere").status == "running"  # left as it was


def test_a_writer_whose_lease_ran_out_left_an_abandoned_run_to_resume(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    _owned_by(path, "another-host:4242:abcd1234", time.time() - 1)
    with SqliteRunStore.from_path(path) as store:
        assert store.load("elsewhere").status == ABANDONED
        resumed = small().resume("elsewhere", store=store)
        assert resumed.status == "finished" and all(t.replayed for t in resumed.turns)
        assert store.list_runs()[0]["status"] == "finished"


def test_a_run_of_a_process_gone_on_this_host_is_abandoned(tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    pid = int(gone.stdout)
    path = tmp_path / "runs.sqlite3"
    # Its lease has not run out: on this host the process itself is what counts.
    _owned_by(path, f"{socket.gethostname()}:{pid}:abcd1234", time.time() + 3600)
    with SqliteRunStore.from_path(path) as store:
        assert store.list_runs()[0]["status"] == ABANDONED
        assert small().run("go", run_id="elsewhere", store=store).status == "finished"
