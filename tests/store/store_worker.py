"""A process that writes runs into a `SqliteRunStore`, for the crash and concurrency tests.

python store_worker.py crash DB RUN_ID            # a long, slow run; prints each committed turn
python store_worker.py write DB PREFIX RUNS GO    # prints ready, waits for the file GO,
                                                  # then writes RUNS runs
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.core.runs.run import Run
from thena_nb.models import ScriptedModel, reply
from thena_nb.store import SqliteRunStore, TurnRecord

LONG_TURNS = 200
"""Turns of the crash test's run: 199 tool calls, then an answer."""
SHORT_TURNS = 12
"""Turns of each run the concurrency test writes."""


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def script(turns: int) -> list[Any]:
    """`turns - 1` calls of `add`, then an answer."""
    return [*(reply.tool("add", a=i, b=1) for i in range(turns - 1)), "done"]


def counting_workflow(replies: list[Any], *, turns: int, delay: float = 0.0) -> Workflow:
    """The same workflow in the worker and in the test that resumes its run."""
    agent = Agent("Counter", model=ScriptedModel(replies, delay=delay), tools=[add], rescue=False)
    return Workflow("long", [loop(steps=[agent], until=until_answered, max_iterations=turns)])


class ReportingStore(SqliteRunStore):
    """Prints each turn's index once it is committed."""

    async def turn_recorded(self, run: Run, record: TurnRecord) -> None:
        await super().turn_recorded(run, record)
        print(record.turn.index, flush=True)


def crash(db: str, run_id: str) -> None:
    store = ReportingStore(db)
    wf = counting_workflow(script(LONG_TURNS), turns=LONG_TURNS, delay=0.02)
    wf.run("count", run_id=run_id, store=store)


def write(db: str, prefix: str, runs: int, go: str) -> None:
    store = SqliteRunStore(db)
    # A short pause per model call spreads each process's writes over the other's.
    wf = counting_workflow(script(SHORT_TURNS), turns=SHORT_TURNS, delay=0.002)
    print("ready", flush=True)
    deadline = time.monotonic() + 30
    while not Path(go).exists() and time.monotonic() < deadline:
        time.sleep(0.001)

    async def all_runs() -> None:
        # Two at a time in this process too, so writes interleave within and across processes.
        for i in range(0, runs, 2):
            ids = [f"{prefix}-{j}" for j in range(i, min(i + 2, runs))]
            await asyncio.gather(*(wf.arun("count", run_id=r, store=store) for r in ids))

    asyncio.run(all_runs())
    store.close()


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "crash":
        crash(*args)
    else:
        write(args[0], args[1], int(args[2]), args[3])
