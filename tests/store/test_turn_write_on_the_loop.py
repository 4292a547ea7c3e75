"""17: the default store writes a turn on the event-loop thread, with no hop to a writer
thread, and has committed it when `turn_recorded` returns (S28)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

from tests.helpers import TURNS_TABLE
from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.core.runs.run import Run
from thena_nb.models import FunctionModel, reply
from thena_nb.store import SqliteRunStore, TurnRecord


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class Watching(SqliteRunStore):
    """Notes, for each turn, the thread that wrote it, whether `turn_recorded` ever gave
    the event loop back, and how many turns another connection sees once it returned."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.seen: list[tuple[str, bool, int]] = []
        self._other = sqlite3.connect(path, check_same_thread=False)

    async def turn_recorded(self, run: Run, record: TurnRecord) -> None:
        coro = super().turn_recorded(run, record)
        try:
            coro.send(None)
        except StopIteration:
            suspended = False
        else:  # pragma: no cover - what this test guards against
            suspended = True
            coro.close()
        (stored,) = self._other.execute(
            f"SELECT count(*) FROM {TURNS_TABLE} WHERE run_id = ?", (run.run_id,)
        ).fetchone()
        self.seen.append((threading.current_thread().name, suspended, stored))


def test_a_turn_is_committed_on_the_event_loop_thread_before_the_next_starts(
    tmp_path: Path,
) -> None:
    def respond(request: Any) -> Any:
        done = sum(1 for m in request.messages if m.role == "tool")
        return "done" if done == 4 else reply.tool("add", a=done, b=1)

    agent = Agent("A", model=FunctionModel(respond), tools=[add])
    wf = Workflow("w", [loop(steps=[agent], until=until_answered)])
    store = Watching(tmp_path / "runs.sqlite3")
    before = {t.name for t in threading.enumerate()}
    run = wf.run("go", store=store)
    main = threading.current_thread().name
    assert store.seen == [(main, False, i + 1) for i in range(len(run.turns))]
    assert len(run.turns) == 5
    # No writer thread was started for the store.
    assert "thena_nb-store" not in {t.name for t in threading.enumerate()}
    assert {t.name for t in threading.enumerate()} <= before | {main}
    conn = sqlite3.connect(tmp_path / "runs.sqlite3")
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()
    store._other.close()
    store.close()
