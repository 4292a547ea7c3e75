"""Processes for the reliability tests of the run stores.

python reliability_worker.py experiment DB GO OUT   # waits for the file GO, runs the shared
                                                    # experiment on DB, writes its run ids
                                                    # and each run's writer pid to OUT
python reliability_worker.py parallel DB MARKS      # a parallel block whose fast branch
                                                    # finishes and whose slow one hangs
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from thena_nb import Agent, Workflow, loop, parallel, tool, until_answered
from thena_nb.experiments import run_experiment
from thena_nb.models import FunctionModel, ScriptedModel, reply
from thena_nb.store import SqliteRunStore

EXPERIMENT_INPUTS = [f"case {i}" for i in range(24)]
EXPERIMENT_TURNS = 3


@tool
def whoami() -> str:
    """The process that ran this call."""
    return f"pid {os.getpid()}"


async def _respond(request: Any) -> Any:
    await asyncio.sleep(0.01)  # long enough for the two processes' runs to overlap
    calls = sum(1 for m in request.messages if m.role == "tool")
    if calls + 1 >= EXPERIMENT_TURNS:
        return f"answered by pid {os.getpid()}"
    return reply.tool("whoami")


def experiment_workflow() -> Workflow:
    """The same experiment in every process: the same fingerprint, the same run ids."""
    agent = Agent("Asker", model=FunctionModel(_respond, name="asker"), tools=[whoami])
    return Workflow("shared", [loop(steps=[agent], until=until_answered, max_iterations=5)])


def experiment(db: str, go: str, out: str) -> None:
    deadline = time.monotonic() + 30
    while not Path(go).exists() and time.monotonic() < deadline:
        time.sleep(0.001)
    with SqliteRunStore.from_path(db) as store:
        exp = run_experiment(
            experiment_workflow(), EXPERIMENT_INPUTS, store=store, concurrency=6, progress=False
        )
        runs = exp.runs  # loaded from the store while it is open
    rows = [{"run_id": run.run_id, "status": run.status, "output": run.output} for run in runs]
    Path(out).write_text(json.dumps({"pid": os.getpid(), "runs": rows, "reused": exp.reused}))


@tool
def mark(marks: str) -> str:
    """Append a line to the file `marks` (each call of this tool is counted there)."""
    with open(marks, "a") as f:
        f.write("called\n")
    return "marked"


async def _hang(request: Any) -> str:
    await asyncio.sleep(float(os.environ.get("HANG_S", "60")))
    return "slow done"


def parallel_workflow(marks: str, slow: Any = None) -> Workflow:
    """A fast branch (a tool call, then an answer) beside a slow one (one long model call)."""
    fast = Agent(
        "Fast",
        model=ScriptedModel([reply.tool("mark", marks=marks), "fast done"], name="fast"),
        tools=[mark],
    )
    slow_agent = Agent("Slow", model=slow or FunctionModel(_hang, name="slow"))
    return Workflow("blocks", [parallel([loop(steps=[fast], until=until_answered), slow_agent])])


def parallel_run(db: str, marks: str) -> None:
    store = SqliteRunStore(db)
    parallel_workflow(marks).run("go", run_id="open-block", store=store)


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "experiment":
        experiment(*args)
    else:
        parallel_run(*args)
