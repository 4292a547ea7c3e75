"""Several writers on one SQLite store at once: other processes, and runs in one process."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from store_worker import SHORT_TURNS, counting_workflow, script

from thena_nb.store import SqliteRunStore

WORKER = Path(__file__).with_name("store_worker.py")


def test_two_processes_write_into_one_store_at_once(tmp_path: Path) -> None:
    """Nothing is lost when two processes commit turns into the same file concurrently."""
    db = tmp_path / "runs.sqlite3"
    go = tmp_path / "go"
    runs = 20
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "write", str(db), prefix, str(runs), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for prefix in ("left", "right")
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    go.touch()  # both start writing at the same moment
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err

    with SqliteRunStore.from_path(db) as store:
        rows = store.list_runs()
        expected = {f"{p}-{i}" for p in ("left", "right") for i in range(runs)}
        assert {r["run_id"] for r in rows} == expected
        assert all(r["status"] == "finished" and r["turns"] == SHORT_TURNS for r in rows)
        # The two processes' runs interleave in time: the writes really were concurrent.
        order = [r["run_id"].split("-")[0] for r in rows]
        assert order != sorted(order)
        for run_id in sorted(expected):
            run = store.load(run_id)
            assert [t.index for t in run.turns] == list(range(SHORT_TURNS))
            assert len(run.history) == 1 + 2 * SHORT_TURNS - 1
            assert run.output == "done"


@pytest.mark.anyio
async def test_runs_at_once_in_one_process_share_a_store(tmp_path: Path) -> None:
    """One store serves many concurrent runs; each keeps exactly its own turns."""
    with SqliteRunStore.from_path(tmp_path / "runs.sqlite3") as store:
        wf = counting_workflow(script(SHORT_TURNS), turns=SHORT_TURNS)
        done = await asyncio.gather(
            *(wf.arun(f"count {i}", run_id=f"r{i}", store=store) for i in range(8))
        )
        for run in done:
            stored = store.load(run.run_id)
            assert stored.input == run.input
            assert stored.history == run.history
            assert [t.model_dump() for t in stored.turns] == [t.model_dump() for t in run.turns]
