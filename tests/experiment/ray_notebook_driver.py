"""A notebook's use of the Ray backend, in a process of its own (for `test_ray_shutdown.py`).

Like a Jupyter kernel, it calls `wf.map(backend="ray")` while an event loop runs on the
main thread (so `wf.map` runs its loop in a thread of its own), then calls `ray.shutdown()`
from the main thread, waits, and prints as JSON the processes it had started that are
still alive.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import psutil
import ray

from thena_nb import Agent, Workflow
from thena_nb.models import ScriptedModel


async def cell() -> list[str]:
    """A notebook cell: synchronous `wf.map` under a running loop."""
    wf = Workflow("w", [Agent("A", model=ScriptedModel(["ok"] * 10))])
    exp = wf.map(["a", "b", "c"], backend="ray", store=False, progress=False, concurrency=3)
    return [run.status for run in exp.runs]


def described(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())[:120]
    except psutil.Error:  # a zombie already, or gone
        return f"pid {process.pid}"


def alive(pids: dict[int, str]) -> dict[int, str]:
    left = {}
    for pid, cmd in pids.items():
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                left[pid] = cmd
        except psutil.NoSuchProcess:
            continue
    return left


def main() -> None:
    statuses = asyncio.run(cell())
    family = {p.pid: described(p) for p in psutil.Process().children(recursive=True)}
    ray.shutdown()
    deadline = time.monotonic() + float(sys.argv[1])
    while alive(family) and time.monotonic() < deadline:
        time.sleep(0.5)
    print(json.dumps({"statuses": statuses, "started": len(family), "alive": alive(family)}))


if __name__ == "__main__":
    main()
