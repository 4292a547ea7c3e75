"""19 #2: the same experiment in two processes on one SQLite file never mixes runs.

A process claims a run before its first turn (its row names the owner, with a lease, in the
same transaction); the other process, finding it claimed, waits and reuses it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from reliability_worker import EXPERIMENT_INPUTS, EXPERIMENT_TURNS, experiment_workflow

from thena_nb import Agent, Workflow
from thena_nb.models import ScriptedModel
from thena_nb.store import MemoryRunStore, RunInUse, RunStore, SqliteRunStore

WORKER = Path(__file__).with_name("reliability_worker.py")


def test_the_same_experiment_in_two_processes_never_mixes_runs(tmp_path: Path) -> None:
    db, go = tmp_path / "runs.sqlite3", tmp_path / "go"
    outs = [tmp_path / f"out{i}.json" for i in range(2)]
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "experiment", str(db), str(go), str(out)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for out in outs
    ]
    go.touch()  # both start at the same moment
    for proc in procs:
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
    results = [json.loads(out.read_text()) for out in outs]
    pids = {r["pid"] for r in results}
    assert len(pids) == 2

    ids = [[row["run_id"] for row in r["runs"]] for r in results]
    assert ids[0] == ids[1] and len(set(ids[0])) == len(EXPERIMENT_INPUTS)
    with SqliteRunStore.from_path(db) as store:
        rows = store.list_runs()
        assert {r["run_id"] for r in rows} == set(ids[0])
        assert all(r["status"] == "finished" for r in rows)
        writers: dict[str, int] = {}
        for run_id in ids[0]:
            run = store.load(run_id)
            assert len(run.turns) == EXPERIMENT_TURNS
            # Every turn of a stored run comes from one process: its tool results and its
            # answer name the same pid.
            said = {m.content.rsplit("pid ", 1)[1] for m in run.history if "pid " in m.content}
            assert len(said) == 1, (run_id, said)
            writers[run_id] = int(said.pop())
            assert {c.result for t in run.turns for c in t.tool_calls} == {f"pid {writers[run_id]}"}
    # Each process's experiment holds the stored runs, whoever made them.
    for r in results:
        for row in r["runs"]:
            assert row["status"] == "finished"
            assert row["output"] == f"answered by pid {writers[row['run_id']]}"


def _two_turns() -> Workflow:
    return Workflow(
        "w", [Agent("A", model=ScriptedModel(["one"])), Agent("B", model=ScriptedModel(["two"]))]
    )


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_run_already_running_is_refused_and_left_untouched(
    kind: str, tmp_path: Path
) -> None:
    """A second writer of a run being run (another store object, or the same one) gets
    `RunInUse`; the run it would have written is left as the first writer makes it."""
    store: RunStore
    if kind == "memory":
        store = MemoryRunStore()
        others: list[RunStore] = [store]
    else:
        store = SqliteRunStore(tmp_path / "runs.sqlite3")
        others = [store, SqliteRunStore(tmp_path / "runs.sqlite3")]
    first = _two_turns().session("go", run_id="shared", store=store)
    await first.step()  # the run is open, paused before its second turn
    for other in others:
        with pytest.raises(RunInUse, match=r"run 'shared' is being run right now by process"):
            await _two_turns().arun("second", run_id="shared", store=other)
    assert store.load("shared").input == "go" and store.load("shared").status == "running"
    await first.run()
    assert store.load("shared").status == "finished" and store.load("shared").input == "go"
    # Once it has ended, a run may be run again under its id when asked (a re-run).
    again = await _two_turns().arun("third", run_id="shared", store=others[-1], overwrite=True)
    assert again.status == "finished" and store.load("shared").input == "third"


def test_experiment_waits_for_the_writer_of_a_claimed_run_and_reuses_it(tmp_path: Path) -> None:
    """In one process too: an experiment that finds one of its runs being run by another
    store waits for it and takes the stored run instead of running it again."""
    db = tmp_path / "runs.sqlite3"
    holder, mine = SqliteRunStore(db), SqliteRunStore(db)
    wf = experiment_workflow()

    async def both() -> tuple[object, object]:
        from thena_nb.experiments import arun_experiment

        first = asyncio.ensure_future(
            arun_experiment(wf, EXPERIMENT_INPUTS[:4], store=holder, progress=False)
        )
        await asyncio.sleep(0.005)  # the holder has claimed its runs
        second = await arun_experiment(wf, EXPERIMENT_INPUTS[:4], store=mine, progress=False)
        return await first, second

    first, second = asyncio.run(both())
    assert [r.run_id for r in first.runs] == [r.run_id for r in second.runs]  # type: ignore[attr-defined]
    turns = [[t.model_dump() for t in r.turns] for r in second.runs]  # type: ignore[attr-defined]
    assert turns == [[t.model_dump() for t in holder.load(r.run_id).turns] for r in first.runs]  # type: ignore[attr-defined]
    assert all(r["status"] == "finished" for r in holder.list_runs())
    holder.close()
    mine.close()
