"""Bytes the Stepper sends its front end: on opening, per move, per step.

The Stepper is one anywidget; each HTML section is a trait of its own and the parts' small
state one more, and only what changed is sent, once per event-loop turn. This records the
widget's comm messages (a stand-in comm that keeps what would go to the front end) on:

- a recorded run of `--turns` turns (default 10,000) opened with `thena_nb.stepper(run)`:
  the opening state, the move to its last turn (the slider's command), then `--moves`
  moves back and forth;
- a live run: `--moves` steps, each one turn.

    .venv/bin/python benchmarks/stepper_bytes.py [--turns N] [--moves N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

import thena_nb
from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.models import ScriptedModel, reply
from thena_nb.notebook.stepper import Stepper


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class Recorder:
    """A comm that keeps the size of each message the widget sends."""

    kernel = True
    comm_id = "recorder"

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def send(self, data: Any = None, metadata: Any = None, buffers: Any = None) -> None:
        self.sizes.append(len(json.dumps(data, default=str).encode()))

    def close(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to close."""

    def on_msg(self, callback: Any) -> None:
        """Nothing is received."""

    def take(self) -> int:
        """Bytes sent since the last call."""
        total = sum(self.sizes)
        self.sizes.clear()
        return total


def workflow(turns: int) -> Workflow:
    replies: list[Any] = [reply.tool("add", a=i, b=1) for i in range(turns - 1)]
    agent = Agent("Calc", model=ScriptedModel([*replies, "done"]), tools=[add], rescue=False)
    return Workflow("bench", [loop(steps=[agent], until=until_answered, max_iterations=turns)])


def recorded(stepper: Stepper) -> Recorder:
    recorder = Recorder()
    stepper.comm = recorder
    return recorder


def view(turns: int, moves: int) -> list[str]:
    started = time.perf_counter()
    run = workflow(turns).run("go", store=False)
    made = time.perf_counter() - started
    stepper = thena_nb.stepper(run)
    opening = len(json.dumps(stepper.get_state(), default=str).encode())
    comm = recorded(stepper)
    stepper.command({"part": "slider", "value": turns - 1})
    stepper.flush()
    last = comm.take()
    sizes = []
    for i in range(moves):
        stepper.command({"part": "back_button" if i % 2 == 0 else "forward_button", "do": "click"})
        stepper.flush()
        sizes.append(comm.take())
    return [
        f"recorded run of {len(run.turns):,} turns (made in {made:.1f} s)",
        f"  opening state          {opening:>10,} bytes",
        f"  move to the last turn  {last:>10,} bytes",
        f"  one move (median)      {statistics.median(sizes):>10,.0f} bytes (max {max(sizes):,})",
    ]


async def live(moves: int) -> list[str]:
    stepper = workflow(moves + 1).stepper("go")
    stepper.chart_delay = 0
    comm = recorded(stepper)
    sizes = []
    for _ in range(moves):
        await stepper.step()
        if stepper.chart_task is not None:
            await stepper.chart_task
        stepper.flush()
        sizes.append(comm.take())
    return [
        f"live run, {moves} steps (chart redrawn after each)",
        f"  one step (median)      {statistics.median(sizes):>10,.0f} bytes (max {max(sizes):,})",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--moves", type=int, default=20)
    args = parser.parse_args()
    print("\n".join(view(args.turns, args.moves)))
    print("\n".join(asyncio.run(live(args.moves))))


if __name__ == "__main__":
    main()
