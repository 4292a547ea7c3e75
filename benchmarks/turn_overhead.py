"""W1: the executor's overhead per turn on a tool loop, and peak memory.

The model asks for `add(a=i, b=1)` N-1 times, then answers; `ScriptedModel` answers at
once, so what is measured is the executor (history, records, tools, checks) per turn. Runs
use `store=False`, so nothing is written to disk. Wall time and CPU time
(`time.process_time`) are both reported; on a shared machine the CPU time is the steadier.

    python benchmarks/turn_overhead.py            # N = 20, 200, 2,000
    python benchmarks/turn_overhead.py --quick    # fewer repeats
    python benchmarks/turn_overhead.py --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
import tracemalloc
from typing import Any

from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.models import FunctionModel, ScriptedModel, reply


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def tool_loop(n: int) -> Workflow:
    """A workflow whose loop makes exactly `n` model calls and `n - 1` tool calls."""
    replies: list[Any] = [reply.tool("add", a=i, b=1) for i in range(n - 1)]
    replies.append("done")
    agent = Agent("Calc", model=ScriptedModel(replies), tools=[add], rescue=False)
    return Workflow("bench", [loop(steps=[agent], until=until_answered, max_iterations=n)])


def function_loop(n: int, *, asynchronous: bool = False) -> Workflow:
    """The same loop on a `FunctionModel` whose O(1) function decides from the number of
    messages it is sent (1, 3, 5, ...: call `i` sees `2i + 1`), rescue on (the default).

    `asynchronous` makes the function an `async def`. The sync one is passed as is
    (`FunctionModel(fn)`), as a user would write it.
    """

    def decide(request: Any) -> Any:
        i = len(request.messages) // 2
        return reply.tool("add", a=i, b=1) if i < n - 1 else "done"

    async def decide_async(request: Any) -> Any:
        return decide(request)

    model = FunctionModel(decide_async if asynchronous else decide)
    agent = Agent("Calc", model=model, tools=[add])
    return Workflow("bench", [loop(steps=[agent], until=until_answered, max_iterations=n)])


async def run_once(wf: Workflow, n: int) -> tuple[float, float]:
    """Run `wf` once (no store) and return its wall and CPU seconds.

    Raises:
        AssertionError: The run did not make exactly `n` model calls and `n - 1` tool calls.
    """
    # The scripted model logs every request it gets (a test double's convenience); drop the
    # log between runs so that it does not grow the heap every garbage collection scans.
    wf.steps[0].steps[0].model.requests.clear()
    w0, c0 = time.perf_counter(), time.process_time()
    run = await wf.arun("go", store=False)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    usage = run.usage
    assert usage.model_calls == n and usage.tool_calls == n - 1, usage
    return wall, cpu


def measure(n: int, repeats: int) -> dict[str, Any]:
    """Median and best µs per turn over `repeats` runs of `tool_loop(n)`, and peak KiB."""
    wf = tool_loop(n)

    async def all_runs() -> list[tuple[float, float]]:
        for _ in range(max(1, repeats // 5)):  # warm-up
            await run_once(wf, n)
        out = []
        for _ in range(repeats):
            gc.collect()
            out.append(await run_once(wf, n))
        return out

    samples = asyncio.run(all_runs())
    walls = [w for w, _ in samples]
    cpus = [c for _, c in samples]
    tracemalloc.start()
    asyncio.run(wf.arun("go", store=False))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "n": n,
        "median_us_per_turn": statistics.median(walls) / n * 1e6,
        "best_us_per_turn": min(walls) / n * 1e6,
        "median_cpu_us_per_turn": statistics.median(cpus) / n * 1e6,
        "peak_kib": peak / 1024,
        "repeats": repeats,
        "model_calls": n,
        "tool_calls": n - 1,
    }


def main(argv: list[str] | None = None) -> int:
    """Measure N = 20, 200 and 2,000, print a table and optionally write JSON."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    plan = [(20, 200), (200, 40), (2000, 8)]
    if args.quick:
        plan = [(20, 20), (200, 5), (2000, 2)]
    rows = [measure(n, r) for n, r in plan]
    print(
        f"{'turns':>6} {'median µs/turn':>15} {'best µs/turn':>13} {'CPU µs/turn':>12}"
        f" {'peak KiB':>10}"
    )
    for row in rows:
        print(
            f"{row['n']:>6} {row['median_us_per_turn']:>15.1f} {row['best_us_per_turn']:>13.1f}"
            f" {row['median_cpu_us_per_turn']:>12.1f} {row['peak_kib']:>10.0f}"
        )
    flat = rows[-1]["median_us_per_turn"] / rows[0]["median_us_per_turn"]
    print(f"N={rows[-1]['n']} / N={rows[0]['n']}: {flat:.2f}x")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"workload": "W1", "rows": rows, "flatness": flat}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
