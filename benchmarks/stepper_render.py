"""How long the Stepper takes to show one turn of a 10,000-turn run (target: under 50 ms).

A real run of 10,000 turns is recorded through a Stepper (a tool loop on `ScriptedModel`,
paused by a breakpoint at turn 10,000). Then three cases are timed, each `--samples` times:

- `show`: scrubbing to a recorded turn (`stepper.show(i)`, random `i`): the turn panel, the
  position line, the frame window and the controls; no model call.
- `step`: `await stepper.step()` on the paused run: one more turn through the executor, then
  everything the Stepper redraws after it, failure chart included.
- `step - executor`: `step` minus the same turn run by a bare `Session` next to it, i.e. the
  Stepper's own share.

The failure chart is not part of a step: it is redrawn in a worker thread once the Stepper
has been idle for `chart_delay` seconds. `chart (worker)` times one such redraw; it is shown
for information and has no target.

    .venv/bin/python benchmarks/stepper_render.py [--turns N] [--samples N]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from typing import Any

from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.models import ScriptedModel, reply
from thena_nb.notebook._stepper_views import chart_png, frozen_loop
from thena_nb.notebook.stepper import Stepper

TARGET_MS = 50.0


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def workflow(turns: int, extra: int) -> Workflow:
    """A tool loop with room for `turns + extra` turns."""
    total = turns + extra
    replies: list[Any] = [reply.tool("add", a=i, b=1) for i in range(total)]
    agent = Agent("Calc", model=ScriptedModel([*replies, "done"]), tools=[add], rescue=False)
    return Workflow("bench", [loop(steps=[agent], until=until_answered, max_iterations=total)])


def summary(name: str, samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
    verdict = "ok" if statistics.median(ms) < TARGET_MS else "OVER"
    return (
        f"{name:<18}{statistics.median(ms):>10.2f}{p95:>10.2f}{max(ms):>10.2f}"
        f"{len(ms):>9}  {verdict}"
    )


async def recorded(turns: int, samples: int) -> tuple[Stepper, Any]:
    wf = workflow(turns, samples + 5)
    stepper = wf.stepper("go")
    stepper.break_when(lambda ctx: len(ctx.turns) >= turns)
    await stepper.run()
    assert stepper.turn_count == turns, stepper.turn_count
    bare = wf.session("go")
    bare.breakpoints.append(lambda turn: turn.index + 1 >= turns)
    await bare.run()
    assert len(bare.result.turns) == turns
    return stepper, bare


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=30)
    args = parser.parse_args()
    started = time.perf_counter()
    stepper, bare = await recorded(args.turns, args.samples)
    print(f"recorded {args.turns:,} turns in {time.perf_counter() - started:.1f} s")

    rng = random.Random(0)
    shows = []
    for _ in range(args.samples):
        index = rng.randrange(args.turns)
        t0 = time.perf_counter()
        stepper.show(index)
        shows.append(time.perf_counter() - t0)

    steps, bare_steps = [], []
    for _ in range(args.samples):
        t0 = time.perf_counter()
        await stepper.step()
        steps.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        await bare.step()
        bare_steps.append(time.perf_counter() - t0)
    own = [max(0.0, s - b) for s, b in zip(steps, bare_steps, strict=True)]

    run = stepper.session.result
    charts = []
    for _ in range(3):
        t0 = time.perf_counter()
        turns = list(run.turns)
        chart_png(turns, [frozen_loop(node, len(turns)) for node in run.loops[-6:]])
        charts.append(time.perf_counter() - t0)

    print(f"{'case':<18}{'median ms':>10}{'p95 ms':>10}{'max ms':>10}{'samples':>9}")
    print(summary("show", shows))
    print(summary("step", steps))
    print(summary("step - executor", own))
    ms = statistics.median(charts) * 1000
    print(f"{'chart (worker)':<18}{ms:>10.2f}{'':>10}{'':>10}{len(charts):>9}  (off the step path)")


if __name__ == "__main__":
    asyncio.run(main())
