"""W7: what diffing two long runs costs (`run.diff`), and its views.

Two 2,000-turn runs of the W1 tool loop (`turn_overhead.tool_loop`) that part near the end:

- `reply`: the second run's model asks for other arguments at turn 1,990 (cause `reply`);
- `fork`: the second run is `run.fork(1990, changes=...)` with another system prompt, so
  its 1,990 reused turns all have other request keys (cause `agent` at turn 1,990);
- `ids`: a model that gives every call a new id, as a live API does, so every request key
  after the first call differs and the histories are compared message by message to turn
  1,990 (cause `reply`).

Target: `run.diff` under 0.5 s for each. `frame()` and `_repr_html_()` of the diff are shown
beside it, untargeted.

    python benchmarks/diff_cost.py             # 2,000 turns, 7 repeats
    python benchmarks/diff_cost.py --quick     # 3 repeats
    python benchmarks/diff_cost.py --json out.json
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.turn_overhead import add, tool_loop
from thena_nb import Agent, Run, ToolCall, Workflow, loop, until_answered
from thena_nb.models import FunctionModel, ModelRequest, Reply, ScriptedModel, reply

TURNS = 2000
DIFF_TARGET_S = 0.5


def _parting_script(n: int, at: int) -> Workflow:
    """`tool_loop(n)`, but the call of turn `at` asks `add(a=-1, b=1)`."""
    replies: list[Any] = [reply.tool("add", a=i if i != at else -1, b=1) for i in range(n - 1)]
    replies.append("done")
    agent = Agent("Calc", model=ScriptedModel(replies), tools=[add], rescue=False)
    return Workflow("bench", [loop(steps=[agent], until=until_answered, max_iterations=n)])


def _fresh_ids(n: int, at: int | None) -> Workflow:
    """A tool loop whose every call has an id of its own; turn `at` asks other arguments."""
    counter = itertools.count()

    def respond(request: ModelRequest) -> Reply:
        k = (len(request.messages) - 1) // 2  # the input, then a call and its result per turn
        if k >= n - 1:
            return Reply(text="done")
        a = -1 if k == at else k
        call = ToolCall(id=f"toolu_{next(counter)}", name="add", arguments={"a": a, "b": 1})
        return Reply(text="", tool_calls=[call])

    agent = Agent("Calc", model=FunctionModel(respond), tools=[add], rescue=False)
    return Workflow("bench", [loop(steps=[agent], until=until_answered, max_iterations=n)])


def pairs(n: int) -> dict[str, tuple[Run, Run]]:
    """The three pairs of runs, each `n` turns long, parting at `n - 10`."""
    at = n - 10
    base = tool_loop(n).run("go", store=False)
    forked = base.fork(at, changes={"Calc": {"system": "Be brief."}}, store=False)
    return {
        "reply": (base, _parting_script(n, at).run("go", store=False)),
        "fork": (base, forked),
        "ids": (
            _fresh_ids(n, None).run("go", store=False),
            _fresh_ids(n, at).run("go", store=False),
        ),
    }


def _median_s(fn: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(name: str, a: Run, b: Run, repeats: int) -> dict[str, Any]:
    """Median seconds of `a.diff(b)`, and of its frame and HTML; where it found the parting."""
    d = a.diff(b)
    div = d.first_divergence
    assert div is not None, f"{name}: the runs should part"
    diff_s = _median_s(lambda: a.diff(b), repeats)
    frame_s = _median_s(d.frame, repeats)
    html_s = _median_s(d._repr_html_, repeats)
    return {
        "case": name,
        "turns": (len(a.turns), len(b.turns)),
        "diverges_at": (div.turn_a, div.turn_b),
        "cause": div.cause,
        "diff_s": diff_s,
        "frame_s": frame_s,
        "html_s": html_s,
    }


def main(argv: list[str] | None = None) -> int:
    """Measure, print a table and optionally write JSON."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    repeats = 3 if args.quick else 7
    rows = [measure(name, a, b, repeats) for name, (a, b) in pairs(TURNS).items()]
    print(
        f"{'case':>6} {'turns':>11} {'parts at':>11} {'cause':>7} {'diff':>8} {'frame':>8}"
        f" {'html':>8}  seconds, medians of {repeats}; target: diff < {DIFF_TARGET_S}"
    )
    for r in rows:
        turns = "{}/{}".format(*r["turns"])
        at = "{}/{}".format(*r["diverges_at"])
        print(
            f"{r['case']:>6} {turns:>11} {at:>11} {r['cause']:>7} {r['diff_s']:>8.4f}"
            f" {r['frame_s']:>8.4f} {r['html_s']:>8.4f}"
        )
    met = {"diff": all(r["diff_s"] < DIFF_TARGET_S for r in rows)}
    print(f"target: diff {'met' if met['diff'] else 'MISSED'}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "workload": "W7",
                    "rows": rows,
                    "targets": {"diff_s": DIFF_TARGET_S},
                    "met": met,
                },
                fh,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
