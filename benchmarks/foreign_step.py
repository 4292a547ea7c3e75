"""W11: what running a pydantic-ai agent as a thena_nb step adds to each of its model calls.

    python -m benchmarks.foreign_step                   # N = 20 and 200 model calls
    python -m benchmarks.foreign_step --calls 20 --rounds 30
    python -m benchmarks.foreign_step --json out.json
    python benchmarks/foreign_step.py --quick           # N = 5 and 20, two rounds each

The W1 tool loop on pydantic-ai's own offline `FunctionModel`: the function asks for
`add(a=i, b=1)` N - 1 times, then answers "done"; `add` is a plain sync tool. The same agent
runs two ways, in one process:

- (a) plainly, `await agent.run("go")`;
- (b) as a step, `await Workflow.of(agent).arun("go", store=store)`, one thena_nb turn per model
  call, each persisted to the default store kind: a `SqliteRunStore` on a file in a temporary
  directory (the workflow is built once, as a notebook builds it once and runs it often).

pydantic-ai refuses a run's 51st request by default (`UsageLimits(request_limit=50)`), and
`Workflow.of` has no way to pass `usage_limits=`, so the agent carries a capability that lifts
the limit when its run starts (`_Unlimited`), the same for both ways. The two ways alternate
round by round (the order flipping each round) so that a busy machine slows them alike; every
run is checked for N model calls and N - 1 tool calls, counted by the function and the tool
(and against pydantic-ai's own tally, or thena_nb's turns). A figure is the median over the
rounds of a run's time divided by N: CPU time (`time.process_time`, which counts the store's
writer thread and pydantic-ai's tool thread too) and wall time. The ratio (b) / (a) per model
call is reported for both; the goal, judged on CPU as W1's are: the step adds at most 30 %
to the framework's own time per model call (ratio ≤ 1.3) at N = 20 and at N = 200.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file, as `python -m benchmarks` runs W11
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.__main__ import render
from benchmarks.peers import _Counter, _verify

GOAL = 1.3
"""The step's time per model call over the framework's own, at most (CPU medians)."""
CALLS = (20, 200)
ROUNDS = {20: 40, 200: 10}
"""Timed rounds per N unless `--rounds` says (each round runs both ways once), after a fifth
as many warm-up rounds."""
QUICK_CALLS = (5, 20)
QUICK_ROUNDS = 2
HEADER = [
    "N",
    "plain µs/call CPU | wall",
    "step µs/call CPU | wall",
    "step ÷ plain CPU",
    "step ÷ plain wall",
    "model calls plain | step",
    "tool calls plain | step",
]
Timed = Callable[[], Coroutine[Any, Any, tuple[float, float, int, int]]]
"""One run: its wall and CPU seconds, and the model and tool calls it made (verified)."""


def loop_agent(n: int, count: _Counter) -> Any:
    """A pydantic-ai agent whose run makes `n` model calls and `n - 1` calls of `add`, both
    counted in `count`."""
    from pydantic_ai import Agent as PydanticAgent
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    class _Unlimited(AbstractCapability[Any]):
        """No request limit for the run (pydantic-ai's default stops a run at 50)."""

        async def before_run(self, ctx: Any) -> None:
            ctx.usage_limits.request_limit = None

    def decide(_messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        i = count.model
        count.model += 1
        if i < n - 1:
            return ModelResponse(
                parts=[ToolCallPart("add", {"a": i, "b": 1}, tool_call_id=f"c{i}")]
            )
        return ModelResponse(parts=[TextPart("done")])

    agent = PydanticAgent(FunctionModel(decide), name="Calc", capabilities=[_Unlimited()])

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        count.tool += 1
        return a + b

    return agent


def runners(n: int, store: Any) -> dict[str, Timed]:
    """The two ways to run the `n`-call loop, plain and as a step into `store`."""
    from thena_nb import Workflow

    count = _Counter()
    agent = loop_agent(n, count)
    wf = Workflow.of(agent)

    async def plain() -> tuple[float, float, int, int]:
        count.reset()
        w0, c0 = time.perf_counter(), time.process_time()
        result = await agent.run("go")
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        usage = result.usage
        assert result.output == "done", result.output
        _verify("pydantic-ai", n, (count.model, count.tool), (usage.requests, usage.tool_calls))
        return wall, cpu, count.model, count.tool

    async def step() -> tuple[float, float, int, int]:
        count.reset()
        w0, c0 = time.perf_counter(), time.process_time()
        run = await wf.arun("go", store=store)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        usage = run.usage
        assert run.status == "finished" and run.output == "done", (run.status, run.error)
        assert len(run.turns) == n, len(run.turns)
        _verify("step", n, (count.model, count.tool), (usage.model_calls, usage.tool_calls))
        return wall, cpu, count.model, count.tool

    return {"plain": plain, "step": step}


def measure(n: int, rounds: int, db: Path) -> dict[str, Any]:
    """Medians per model call of both ways at `n` calls over `rounds` alternating rounds."""
    from thena_nb.store import SqliteRunStore

    store = SqliteRunStore(db)
    ways = runners(n, store)

    async def all_rounds() -> dict[str, list[tuple[float, float, int, int]]]:
        times: dict[str, list[tuple[float, float, int, int]]] = {k: [] for k in ways}
        for _ in range(max(1, rounds // 5)):  # warm-up
            for run in ways.values():
                await run()
        for r in range(rounds):
            for kind in list(ways)[:: 1 if r % 2 == 0 else -1]:
                gc.collect()
                times[kind].append(await ways[kind]())
        return times

    try:
        times = asyncio.run(all_rounds())
    finally:
        store.close()
    wall = {k: statistics.median(t[0] for t in v) / n * 1e6 for k, v in times.items()}
    cpu = {k: statistics.median(t[1] for t in v) / n * 1e6 for k, v in times.items()}
    # every distinct (model calls, tool calls) the timed runs of each way made
    calls = {k: [list(c) for c in sorted({t[2:] for t in v})] for k, v in times.items()}
    return {
        "n": n,
        "rounds": rounds,
        "calls": calls,
        "plain_cpu_us_per_call": cpu["plain"],
        "plain_wall_us_per_call": wall["plain"],
        "step_cpu_us_per_call": cpu["step"],
        "step_wall_us_per_call": wall["step"],
        "ratio_cpu": cpu["step"] / cpu["plain"],
        "ratio_wall": wall["step"] / wall["plain"],
    }


def table(rows: list[dict[str, Any]]) -> list[list[str]]:
    """The printed table's rows (`HEADER` its header), one per N."""
    out = []
    for r in rows:
        out.append(
            [
                f"{r['n']:,}",
                f"{r['plain_cpu_us_per_call']:,.0f} | {r['plain_wall_us_per_call']:,.0f}",
                f"{r['step_cpu_us_per_call']:,.0f} | {r['step_wall_us_per_call']:,.0f}",
                f"{r['ratio_cpu']:.2f}",
                f"{r['ratio_wall']:.2f}",
                *(
                    f"{p} | {q}"
                    for p, q in zip(_counted(r, "plain"), _counted(r, "step"), strict=True)
                ),
            ]
        )
    return out


def _counted(row: dict[str, Any], way: str) -> list[str]:
    """(model calls, tool calls) of `way`'s runs, as text; several if its runs differed."""
    found = row["calls"][way]
    return ["/".join(f"{c[i]:,}" for c in found) for i in (0, 1)]


def main(argv: list[str] | None = None) -> int:
    """Measure, print a table and optionally write JSON."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, nargs="+", help="model calls per run (20 200)")
    parser.add_argument(
        "--rounds", type=int, help="timed rounds at each N (default 40 at N=20, 10 at N=200)"
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"N = 5 and 20, {QUICK_ROUNDS} rounds each"
    )
    parser.add_argument("--json", help="also write the figures to this file")
    opts = parser.parse_args(argv)
    if opts.quick:
        opts.calls, opts.rounds = opts.calls or list(QUICK_CALLS), opts.rounds or QUICK_ROUNDS
    opts.calls = opts.calls or list(CALLS)
    if min(opts.calls) < 1 or (opts.rounds is not None and opts.rounds < 1):
        parser.error("--calls and --rounds must be at least 1")
    if importlib.util.find_spec("pydantic_ai") is None:
        raise SystemExit('W11 needs pydantic-ai: pip install -e ".[pydantic-ai]"')
    plan = [(n, opts.rounds or ROUNDS.get(n, max(3, 3000 // n))) for n in opts.calls]
    with tempfile.TemporaryDirectory(prefix="foreign-step-") as tmp:
        rows = [measure(n, r, Path(tmp) / f"runs-{n}.sqlite3") for n, r in plan]
    print(render(table(rows), HEADER))
    judged = [r["ratio_cpu"] for r in rows if r["n"] in CALLS]
    met = {}
    verdict = "not judged (it is set at N = 20 and 200)"
    if judged:
        met["step_adds_at_most_30_percent"] = all(math.isfinite(x) and x <= GOAL for x in judged)
        verdict = "met" if met["step_adds_at_most_30_percent"] else "MISSED"
    print(
        f"medians per model call over alternating rounds; goal at N = 20 and 200: "
        f"step ÷ plain ≤ {GOAL:.1f} (CPU): {verdict}"
    )
    if opts.json:
        with open(opts.json, "w") as fh:
            json.dump(
                {"workload": "W11", "rows": rows, "goal_ratio_cpu": GOAL, "met": met},
                fh,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
