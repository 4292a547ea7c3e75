"""Experiments at scale: many 3-turn runs on a slow model, at high concurrency.

Every run calls `lookup` twice and then answers (3 turns); the model takes 50 ms per call
(an async `FunctionModel`, so no thread per call).
With `R` runs at concurrency `C` the ideal wall time is `R * 3 * 50 ms / C` (1,000 runs at
100: 1.5 s). The local backend should stay within 1.5x of it. The executor's CPU time per
turn (`time.process_time`) is reported too; the model's sleeps cost no CPU, so it is the
executor's own work (history, records, tools, checks, scheduling). The experiment runs
twice: with its runs going to a `MemoryRunStore` (as an experiment's runs go to a store; the
target is judged on this one) and with `store=False` (the executor alone).

    python benchmarks/experiment_scale.py             # 1,000 runs at concurrency 100
    python benchmarks/experiment_scale.py --quick     # 200 runs
    python benchmarks/experiment_scale.py --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.experiments import run_experiment
from thena_nb.models import FunctionModel, ModelRequest, Reply, reply
from thena_nb.store import MemoryRunStore

DELAY_S = 0.05
TURNS = 3
TARGET = 1.5
"""The local backend's wall time may be at most this many times the ideal."""


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


REPLIES = [reply.tool("lookup", q="a"), reply.tool("lookup", q="b"), reply.text("done")]


async def slow_model(request: ModelRequest) -> Reply:
    """Takes 50 ms, then replies by how many tool results the run has seen so far.

    Stateless, so any number of interleaved runs can share it.
    """
    await asyncio.sleep(DELAY_S)
    return REPLIES[sum(1 for m in request.messages if m.role == "tool")]


def three_turns() -> Workflow:
    """A loop that makes exactly three model calls (two tool calls, then an answer)."""
    model = FunctionModel(slow_model, name="slow")
    agent = Agent("Executor", model=model, tools=[lookup], rescue=False)
    return Workflow("scale", [loop(steps=[agent], until=until_answered)])


def measure(
    runs: int, concurrency: int, *, store: bool = True, progress: bool = False
) -> dict[str, Any]:
    """Run the experiment once and return its figures.

    Raises:
        AssertionError: A run did not finish with exactly three turns.
    """
    wf = three_turns()
    inputs = [f"question {i}" for i in range(runs)]
    w0, c0 = time.perf_counter(), time.process_time()
    exp = run_experiment(
        wf,
        inputs,
        concurrency=concurrency,
        store=MemoryRunStore() if store else False,
        progress=progress,
    )
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    assert len(exp.runs) == runs, exp
    assert all(r.status == "finished" and len(r.turns) == TURNS for r in exp.runs)
    ideal = runs * TURNS * DELAY_S / concurrency
    return {
        "store": "memory" if store else "none",
        "runs": runs,
        "concurrency": concurrency,
        "turns": runs * TURNS,
        "wall_s": round(wall, 3),
        "ideal_s": round(ideal, 3),
        "ratio": round(wall / ideal, 3),
        "cpu_s": round(cpu, 3),
        "cpu_us_per_turn": round(cpu / (runs * TURNS) * 1e6, 1),
        "within_target": wall <= TARGET * ideal,
    }


def main(argv: list[str] | None = None) -> int:
    """Print the figures; exit 1 when the wall time is over 1.5x the ideal."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 runs instead of 1,000")
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--progress", action="store_true", help="show the progress bar")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)
    runs = args.runs or (200 if args.quick else 1000)
    measure(10, 10, store=True)  # warm-up: first-use imports and schema builds
    results = [
        measure(runs, args.concurrency, store=store, progress=args.progress)
        for store in (True, False)
    ]
    print(
        f"{runs} runs x {TURNS} turns at concurrency {args.concurrency}, "
        f"{DELAY_S * 1000:.0f} ms per model call; ideal {results[0]['ideal_s']:.3f} s"
    )
    for r in results:
        print(
            f"  store={r['store']:<6}  wall {r['wall_s']:.3f} s  ratio {r['ratio']:.2f} "
            f"(target <= {TARGET})  executor CPU {r['cpu_s']:.3f} s = "
            f"{r['cpu_us_per_turn']:.0f} us per turn"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0 if results[0]["within_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
