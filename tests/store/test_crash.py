"""A process killed mid-run (SIGKILL) leaves a store that opens cleanly and resumes (S28)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from store_worker import LONG_TURNS, counting_workflow, script

from thena_nb.store import SqliteRunStore

WORKER = Path(__file__).with_name("store_worker.py")

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")


def _kill_after(db: Path, run_id: str, committed: int) -> list[int]:
    """Start the worker, SIGKILL it once `committed` turns are reported, return them all."""
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), "crash", str(db), run_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    printed: list[int] = []
    timer = threading.Timer(60, proc.kill)  # never hang the suite
    timer.start()
    try:
        for line in proc.stdout:
            printed.append(int(line))
            if len(printed) >= committed:
                os.kill(proc.pid, signal.SIGKILL)
                break
        printed.extend(int(line) for line in proc.stdout)  # reported before the kill landed
    finally:
        timer.cancel()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
    return printed


def test_s28_a_killed_process_keeps_every_committed_turn_and_resumes(tmp_path: Path) -> None:
    """S28: after SIGKILL mid-run the store holds every turn committed before the kill."""
    db = tmp_path / "runs.sqlite3"
    printed = _kill_after(db, "killed", committed=5)
    assert printed == list(range(len(printed))) and len(printed) < LONG_TURNS

    with SqliteRunStore.from_path(db) as store:
        check = store._conn.execute("PRAGMA integrity_check").fetchone()
        assert check == ("ok",)
        loaded = store.load("killed")
        k = len(loaded.turns)
        # Its process is gone: the run shows as abandoned, not running for ever.
        assert loaded.status == "abandoned" and loaded.finished_at is None
        assert [r["status"] for r in store.list_runs()] == ["abandoned"]
        assert [t.index for t in loaded.turns] == list(range(k))
        assert set(printed) <= set(range(k)) and k < LONG_TURNS
        # The history is rebuilt from the turn records: the input, then a call and its result.
        assert len(loaded.history) == 1 + 2 * k
        assert [m.tool_call_id for m in loaded.history[2::2]] == [
            t.tool_calls[0].id for t in loaded.turns
        ]
        assert loaded.usage.tool_calls == k and loaded.usage.model_calls == k
        assert loaded.loops[0].iterations == k and loaded.loops[0].stop_reason is None

        # A new process resumes it: only the turns after the kill call the model.
        tail = script(LONG_TURNS)[k:]
        wf = counting_workflow(tail, turns=LONG_TURNS)
        model = wf.steps[0].steps[0].model
        resumed = wf.resume("killed", store=store)
        assert resumed.status == "finished" and resumed.run_id == "killed"
        assert len(resumed.turns) == LONG_TURNS
        assert [t.replayed for t in resumed.turns] == [True] * k + [False] * (LONG_TURNS - k)
        assert len(model.requests) == LONG_TURNS - k
        assert resumed.loops[0].stop_reason == "until"

        stored = store.load("killed")
        assert stored.status == "finished" and len(stored.turns) == LONG_TURNS
        assert stored.history == resumed.history
        # The turns finished before the kill are kept as they first happened.
        assert [t.replayed for t in stored.turns[:k]] == [False] * k
        assert [t.model_dump() for t in stored.turns[:k]] == [t.model_dump() for t in loaded.turns]
        assert [r["status"] for r in store.list_runs()] == ["finished"]


def test_a_store_opens_while_another_process_was_killed_holding_it(tmp_path: Path) -> None:
    """A kill leaves no lock behind: a new writer commits at once."""
    db = tmp_path / "runs.sqlite3"
    _kill_after(db, "first", committed=2)
    t0 = time.monotonic()
    with SqliteRunStore.from_path(db) as store:
        store.delete("first")
        assert store.list_runs() == []
    assert time.monotonic() - t0 < 5
