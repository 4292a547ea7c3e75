"""19 #17: an experiment finds the runs it can reuse by run id (an index), without listing
the store; it reads what their rows need in bulk and loads none of them (issue 41 #3) until
`exp.runs` is read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from thena_nb import Agent, Workflow
from thena_nb.core.runs.run import Run
from thena_nb.experiments import run_experiment
from thena_nb.models import FunctionModel
from thena_nb.store import MemoryRunStore, SqliteRunStore


def _echo(request: Any) -> str:
    return f"echo {request.messages[-1].content}"


def echo(name: str = "echo") -> Workflow:
    return Workflow(name, [Agent("A", model=FunctionModel(_echo, name="echo"))])


class CountingStore(SqliteRunStore):
    """Counts what the reading side is asked for."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.listed = 0
        self.loaded: list[str] = []

    def list_runs(self) -> list[dict[str, Any]]:
        self.listed += 1
        return super().list_runs()

    def load(self, run_id: str) -> Run:
        self.loaded.append(run_id)
        return super().load(run_id)


def test_reuse_looks_runs_up_by_id_and_loads_none_until_runs_is_read(tmp_path: Path) -> None:
    with CountingStore(tmp_path / "runs.sqlite3") as store:
        for i in range(30):  # other workflows' runs, which the look-up never reads
            echo("other").run(f"x{i}", store=store)
        first = run_experiment(echo(), ["a", "b", "c"], store=store, progress=False)
        store.listed, store.loaded = 0, []
        again = run_experiment(echo(), ["a", "b", "c", "d"], store=store, progress=False)
        assert again.reused == 3 and store.listed == 0
        assert store.loaded == []  # summarised in bulk (and run_ids loads nothing)
        assert again.run_ids[:3] == first.run_ids
        assert [r.output for r in again.runs] == ["echo a", "echo b", "echo c", "echo d"]
        assert store.loaded == again.run_ids  # each loaded as `runs` is read


def test_a_store_without_statuses_is_looked_up_through_its_listing() -> None:
    class Plain(MemoryRunStore):
        statuses = None  # a store of your own may lack it

    store = Plain()
    run_experiment(echo(), ["a", "b"], store=store, progress=False)
    assert run_experiment(echo(), ["a", "b"], store=store, progress=False).reused == 2


def test_statuses_answers_for_the_ids_asked_only(tmp_path: Path) -> None:
    with SqliteRunStore.from_path(tmp_path / "runs.sqlite3") as store:
        ids = [echo().run(f"in {i}", store=store).run_id for i in range(3)]
        many = ["missing"] * 1200 + ids[:2]  # more ids than one statement takes
        assert store.statuses(many) == {ids[0]: "finished", ids[1]: "finished"}
    memory = MemoryRunStore()
    run = echo().run("m", store=memory)
    assert memory.statuses([run.run_id, "missing"]) == {run.run_id: "finished"}
