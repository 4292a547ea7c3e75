"""The run store contract (`contract.py`) against both of our stores."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from contract import *  # noqa: F403

from thena_nb.store import MemoryRunStore, RunStore, SqliteRunStore

STORES = ["memory", "sqlite"]


@pytest.fixture(params=STORES)
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[RunStore, RunStore]]:
    """A store, and a second view of it (for SQLite, another connection to the same file)."""
    if request.param == "memory":
        memory = MemoryRunStore()
        yield memory, memory
        return
    path = tmp_path / "runs.sqlite3"
    with SqliteRunStore.from_path(path) as store, SqliteRunStore.from_path(path) as reader:
        yield store, reader


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
