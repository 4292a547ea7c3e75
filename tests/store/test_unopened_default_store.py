"""A default store file that cannot be opened (corrupt) is said to be so, every time: the
first run warns and goes on unstored, and later messages name the file and why, never that
the store is off (which `THENA_NB_STORE=off` alone means)."""

from __future__ import annotations

from pathlib import Path

import pytest

from thena_nb import Agent, Run, Workflow, runs
from thena_nb.core.records.errors import StoreError
from thena_nb.models import ScriptedModel


def hello() -> Workflow:
    return Workflow("hello", [Agent("A", model=ScriptedModel(["hi"]))])


def test_a_corrupt_default_store_is_named_in_later_errors_not_called_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corrupt = tmp_path / "runs.sqlite3"
    corrupt.write_bytes(b"this is not a database, just some bytes" * 200)
    monkeypatch.setenv("THENA_NB_STORE", str(corrupt))
    with pytest.warns(RuntimeWarning, match="runs are not being stored"):
        run = hello().run("go")
    assert run.status == "finished"  # the run itself goes on, unstored
    for later in (lambda: Run.load(run.run_id), runs):
        with pytest.raises(StoreError) as caught:
            later()
        said = str(caught.value)
        assert "'off'" not in said
        assert str(corrupt) in said and "could not be opened" in said


def test_a_store_turned_off_is_still_said_to_be_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THENA_NB_STORE", "off")
    with pytest.raises(StoreError, match=r"THENA_NB_STORE is 'off'"):
        Run.load("abc")
