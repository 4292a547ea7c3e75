"""Nothing is stored that cannot be read back: deep nesting is refused at definition, and
the deepest workflow allowed round-trips through a real SQLite file and resumes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from thena_nb import Agent, Workflow, WorkflowDefinitionError, loop, parallel, until_answered
from thena_nb.core.workflow import MAX_NESTING
from thena_nb.models import ScriptedModel
from thena_nb.store import SqliteRunStore


def nested(depth: int, kinds: str) -> Workflow:
    step: Any = Agent("A", model=ScriptedModel(["x"] * 10))
    for i in range(depth):
        if kinds[i % len(kinds)] == "l":
            step = loop(steps=[step], until=until_answered, max_iterations=1)
        else:
            step = parallel([step])
    return Workflow("w", [step])


@pytest.mark.parametrize("kinds", ["l", "p", "lp"])
def test_the_deepest_nesting_allowed_is_stored_loaded_and_resumed(
    tmp_path: Path, kinds: str
) -> None:
    store = SqliteRunStore(tmp_path / "runs.db")
    wf = nested(MAX_NESTING, kinds)
    run = wf.run("go", store=store)
    loaded = store.load(run.run_id)
    assert loaded.status == "finished" and len(loaded.turns) == 1
    assert loaded.report == run.report
    assert wf.resume(run.run_id, store=store).turns[0].replayed


@pytest.mark.parametrize("kinds", ["l", "p", "lp"])
def test_nesting_deeper_is_refused_before_anything_runs(kinds: str) -> None:
    with pytest.raises(WorkflowDefinitionError, match=rf"nest more than {MAX_NESTING} deep"):
        nested(MAX_NESTING + 1, kinds)
