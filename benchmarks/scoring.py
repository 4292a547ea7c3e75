"""Scoring at scale: 10,000 stored runs scored again with three built-in scorers.

The runs are made once (2,500 cases x 2 variants x 2 repeats, a lookup and an answer each,
on an offline model) into a `MemoryRunStore`; the same experiment is then run again, which
takes every run from the store (no model call), and `exp.rescore([...])` scores them with
`contains`, `tool_trajectory` and `no_failed_tools`. The target: under 2 s for the scoring
(the median of a few rounds). `compare()` and `frame()` of the scored experiment are timed
too, for information.

    python benchmarks/scoring.py              # 10,000 runs
    python benchmarks/scoring.py --quick      # 2,000 runs
    python benchmarks/scoring.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.experiments import Experiment
from thena_nb.models import FunctionModel, ModelRequest, Reply, reply
from thena_nb.scorers import contains, no_failed_tools, tool_trajectory
from thena_nb.store import MemoryRunStore

TARGET_S = 2.0
"""Scoring 10,000 runs with three built-in scorers may take at most this long."""
VARIANTS = {"brief": {"Executor": {"system": "Be brief."}}, "plain": {}}
REPEATS = 2


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


REPLIES = [reply.tool("lookup", q="capital"), reply.text("Paris")]


async def offline(request: ModelRequest) -> Reply:
    """A lookup, then the answer: stateless, so interleaved runs can share it."""
    return REPLIES[sum(1 for m in request.messages if m.role == "tool")]


def workflow() -> Workflow:
    agent = Agent("Executor", model=FunctionModel(offline), tools=[lookup], rescue=False)
    return Workflow("scoring", [loop(steps=[agent], until=until_answered)])


def stored_experiment(runs: int) -> tuple[Experiment, float]:
    """The experiment of `runs` runs, taken from the store, and how long making them took."""
    cases = [f"question {i}" for i in range(runs // (len(VARIANTS) * REPEATS))]
    wf, store = workflow(), MemoryRunStore()
    started = time.perf_counter()
    wf.map(cases, variants=VARIANTS, repeats=REPEATS, store=store, progress=False,
           concurrency=100)  # fmt: skip
    made = time.perf_counter() - started
    exp = wf.map(cases, variants=VARIANTS, repeats=REPEATS, store=store, progress=False)
    assert exp.reused == len(exp.runs) == runs, exp
    return exp, made


def measure(runs: int, rounds: int) -> dict[str, Any]:
    """Score the stored runs `rounds` times and return the figures.

    Raises:
        AssertionError: A score is not what the runs say.
    """
    exp, made = stored_experiment(runs)
    scorers = [contains("paris"), tool_trajectory(["lookup"]), no_failed_tools()]
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        scored = exp.rescore(scorers)
        times.append(time.perf_counter() - started)
    started = time.perf_counter()
    compare = scored.compare()
    compare_s = time.perf_counter() - started
    started = time.perf_counter()
    frame = scored.frame()
    frame_s = time.perf_counter() - started
    assert bool(frame["contains"].all() and frame["tool_trajectory"].all()), frame
    assert list(compare["contains"]) == [1.0, 1.0], compare
    score_s = statistics.median(times)
    return {
        "runs": runs,
        "scorers": len(scorers),
        "make_runs_s": round(made, 3),
        "score_s": round(score_s, 3),
        "score_us_per_run": round(score_s / runs * 1e6, 1),
        "compare_s": round(compare_s, 3),
        "frame_s": round(frame_s, 3),
        "within_target": score_s <= TARGET_S * runs / 10_000,
    }


def main(argv: list[str] | None = None) -> int:
    """Print the figures; exit 1 when scoring is over the target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 runs instead of 10,000")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)
    runs = 2_000 if args.quick else 10_000
    measure(40, 1)  # warm-up: first-use imports
    r = measure(runs, args.rounds)
    print(
        f"{r['runs']} stored runs, {r['scorers']} built-in scorers: scoring {r['score_s']:.3f} s "
        f"(median of {args.rounds}; target < {TARGET_S * runs / 10_000:.1f} s) = "
        f"{r['score_us_per_run']:.0f} us per run; compare {r['compare_s']:.3f} s, "
        f"frame {r['frame_s']:.3f} s (making the runs took {r['make_runs_s']:.1f} s)"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=2)
    return 0 if r["within_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
