"""19 #4: a parallel branch's turn is stored as it finishes, while its block is still open,
and a resume after a kill reuses it: its tool does not run again."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from reliability_worker import parallel_workflow

from thena_nb.core.records.errors import StoreError
from thena_nb.models import FunctionModel
from thena_nb.store import MemoryRunStore, RunStore, SqliteRunStore

WORKER = Path(__file__).with_name("reliability_worker.py")

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")


def _stored_open_turns(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with SqliteRunStore.from_path(db) as store:
            return len(store.load("open-block").open_turns)
    except Exception:
        return 0  # not created yet


BOUND_S = 30.0
"""How long a test waits for what it waits on: a bound, not a speed."""


async def _open_turns(store: RunStore, run_id: str, count: int) -> None:
    """Wait until the run's open block has `count` branch turns stored (polled)."""
    while True:
        try:
            if len(store.load(run_id).open_turns) >= count:
                return
        except StoreError:
            pass  # the run is not stored yet
        await asyncio.sleep(0.002)


def test_a_branch_turn_survives_a_kill_inside_its_block_and_is_reused(tmp_path: Path) -> None:
    db, marks = tmp_path / "runs.sqlite3", tmp_path / "marks"
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), "parallel", str(db), str(marks)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        # The fast branch's two turns are stored while the slow branch still waits.
        while _stored_open_turns(db) < 2 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert marks.read_text() == "called\n"

    with SqliteRunStore.from_path(db) as store:
        killed = store.load("open-block")
        assert killed.status == "abandoned" and killed.turns == []  # the block never merged
        assert [t.agent for t in killed.open_turns] == ["Fast", "Fast"]
        assert killed.open_turns[0].tool_calls[0].result == "marked"

        async def quick(request: object) -> str:
            return "slow done"

        wf = parallel_workflow(str(marks), slow=FunctionModel(quick, name="slow"))
        resumed = wf.resume("open-block", store=store)
        assert resumed.status == "finished"
        assert marks.read_text() == "called\n"  # the fast branch's tool did not run again
        fast = [t for t in resumed.turns if t.agent == "Fast"]
        assert [t.replayed for t in fast] == [True, True]
        assert [t.agent for t in resumed.turns] == ["Fast", "Fast", "Slow"]
        stored = store.load("open-block")
        assert stored.status == "finished" and stored.open_turns == []
        assert [t.info.response for t in stored.turns] == ["", "fast done", "slow done"]
        assert stored.history == resumed.history


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_each_branch_turn_is_stored_as_it_finishes(kind: str, tmp_path: Path) -> None:
    """Both stores keep a branch turn the moment it finishes (`run.open_turns` of a load),
    and drop it from there once the block has merged it into the run's turns."""
    release = asyncio.Event()

    async def slow(request: object) -> str:
        await release.wait()
        return "slow done"

    store = MemoryRunStore() if kind == "memory" else SqliteRunStore(tmp_path / "r.sqlite3")
    wf = parallel_workflow(str(tmp_path / "marks"), slow=FunctionModel(slow, name="slow"))
    task = asyncio.ensure_future(wf.arun("go", run_id="b", store=store))
    await asyncio.wait_for(_open_turns(store, "b", 2), BOUND_S)
    loaded = store.load("b")
    assert [t.agent for t in loaded.open_turns] == ["Fast", "Fast"] and loaded.turns == []
    release.set()
    run = await task
    done = store.load("b")
    assert done.open_turns == [] and len(done.turns) == 3
    assert [t.model_dump() for t in done.turns] == [t.model_dump() for t in run.turns]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_failed_block_keeps_its_finished_branch_turns_for_the_resume(
    kind: str, tmp_path: Path
) -> None:
    """A branch that raises fails its block (S6: the run keeps none of its turns); the
    branch turns that did finish stay stored, and the resume reuses them."""
    marks = tmp_path / "marks"
    store = MemoryRunStore() if kind == "memory" else SqliteRunStore(tmp_path / "r.sqlite3")

    async def broken(request: object) -> str:
        await asyncio.wait_for(_open_turns(store, "f", 2), BOUND_S)  # the fast branch is done
        raise RuntimeError("the slow model is down")

    failing = parallel_workflow(str(marks), slow=FunctionModel(broken, name="slow"))
    with pytest.raises(RuntimeError, match="the slow model is down"):
        failing.run("go", run_id="f", store=store)
    failed = store.load("f")
    assert failed.status == "failed" and failed.turns == []
    assert [t.agent for t in failed.open_turns] == ["Fast", "Fast"]

    async def fixed(request: object) -> str:
        return "slow done"

    resumed = parallel_workflow(str(marks), slow=FunctionModel(fixed, name="slow")).resume(
        "f", store=store
    )
    assert resumed.status == "finished" and marks.read_text() == "called\n"
    assert [(t.agent, t.replayed) for t in resumed.turns] == [
        ("Fast", True),
        ("Fast", True),
        ("Slow", False),
    ]
    assert store.load("f").open_turns == []
