"""The run store contract (`thena_nb.store_contract`) against both of our stores."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from thena_nb.store import MemoryRunStore, RunStore, SqliteRunStore
from thena_nb.store_contract import *  # noqa: F403

STORES = ["memory", "sqlite"]


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunStore]:
    if request.param == "memory":
        yield MemoryRunStore()
        return
    with SqliteRunStore.from_path(tmp_path / "runs.sqlite3") as store:
        yield store


@pytest.fixture
def reader(store: RunStore, tmp_path: Path) -> Iterator[RunStore]:
    """A second view of the store: the same object in memory, another connection to SQLite."""
    if isinstance(store, MemoryRunStore):
        yield store
        return
    with SqliteRunStore.from_path(tmp_path / "runs.sqlite3") as reader:
        yield reader


def test_stores_satisfy_the_protocol() -> None:
    needed: list[Callable[..., Any]] = [
        RunStore.run_started,
        RunStore.turn_recorded,
        RunStore.run_finished,
        RunStore.load,
        RunStore.list_runs,
        RunStore.delete,
    ]
    for cls in (MemoryRunStore, SqliteRunStore):
        for method in needed:
            assert callable(getattr(cls, method.__name__)), (cls, method.__name__)
