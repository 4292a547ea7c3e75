"""W12: a run's page (`run.to_html`) of a W1 run: bytes per turn, and its time against a floor.

The run is W1's tool loop (a sync `FunctionModel` that calls `add` N - 1 times, then
answers; rescue on), run without a store. For N = 100, 1,000 and 5,000 turns the script
renders the page (`run_page_html`, what `to_html` writes) and, in alternating rounds after a
`gc.collect()` each, the floor: `json.dumps` of the run's turns as JSON-ready dicts, the
least any rendering of every turn must do. It prints bytes per turn (machine-independent),
the page's and the floor's median milliseconds and their ratio. Targets: at most 3 KB per
turn, and 1,000 turns in under 1 s on the machine at hand.

A page that grows with the square of the run would take minutes at 5,000 turns: an N whose
time, extrapolated from the N before it as a square, passes `--limit` seconds is not run.

    .venv/bin/python benchmarks/page_size.py [--quick] [--json out.json] [--limit 120]

To measure another checkout's page with this same script, put it first on the path:
`PYTHONPATH=/path/to/checkout .venv/bin/python benchmarks/page_size.py`; the first line
printed names the `thena_nb` imported.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import thena_nb
from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.models import FunctionModel, reply
from thena_nb.notebook.page import run_page_html

SIZES = (100, 1_000, 5_000)
BYTES_TARGET = 3 * 1024
SECONDS_TARGET = 1.0
"""For 1,000 turns; machine-dependent, hence the ratio to the floor beside it."""


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def w1_loop(n: int) -> Workflow:
    """W1's loop (`benchmarks/turn_overhead.py`, `function_loop`): `n` model calls, `n - 1`
    tool calls, the function deciding from the number of messages it is sent."""

    def decide(request: Any) -> Any:
        i = len(request.messages) // 2
        return reply.tool("add", a=i, b=1) if i < n - 1 else "done"

    agent = Agent("Calc", model=FunctionModel(decide), tools=[add])
    return Workflow("bench", [loop(steps=[agent], until=until_answered, max_iterations=n)])


def floor(run: Any) -> int:
    """`json.dumps` of the run's turns: what rendering every turn costs at the least."""
    return len(json.dumps([t.model_dump(mode="json") for t in run.turns]))


def measure(n: int, rounds: int) -> dict[str, Any]:
    """Page bytes per turn of an `n`-turn W1 run; page and floor medians over `rounds`."""
    run = w1_loop(n).run("go", store=False)
    assert len(run.turns) == n and run.output == "done", (len(run.turns), run.output)
    pages: list[float] = []
    floors: list[float] = []
    size = 0
    for _ in range(rounds):  # alternating: a busy moment slows both, not one
        gc.collect()
        t0 = time.perf_counter()
        floor(run)
        floors.append(time.perf_counter() - t0)
        gc.collect()
        t0 = time.perf_counter()
        size = len(run_page_html(run).encode())
        pages.append(time.perf_counter() - t0)
    page_s, floor_s = statistics.median(pages), statistics.median(floors)
    return {
        "turns": n,
        "status": "measured",
        "bytes": size,
        "bytes_per_turn": size / n,
        "page_ms": page_s * 1e3,
        "floor_ms": floor_s * 1e3,
        "ratio_to_floor": page_s / floor_s,
        "rounds": rounds,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument(
        "--limit", type=float, default=120.0, help="skip an N predicted to take longer (s)"
    )
    args = parser.parse_args()
    print(f"thena_nb from {Path(thena_nb.__file__).parent}")
    rows: list[dict[str, Any]] = []
    previous: dict[str, Any] | None = None
    for n in SIZES:
        if previous is not None:
            predicted = previous["page_ms"] / 1e3 * (n / previous["turns"]) ** 2
            if predicted > args.limit:
                rows.append({"turns": n, "status": f"not run (about {predicted:,.0f} s)"})
                continue
        rounds = (3 if args.quick else 7) if n < 5_000 else (1 if args.quick else 3)
        one = measure(n, rounds if previous is None or previous["page_ms"] < 5e3 else 1)
        rows.append(one)
        previous = one
    print(f"{'turns':>7}{'bytes/turn':>12}{'page ms':>11}{'floor ms':>10}{'ratio':>10}")
    for row in rows:
        if row["status"] != "measured":
            print(f"{row['turns']:>7,}  {row['status']}")
            continue
        print(
            f"{row['turns']:>7,}{row['bytes_per_turn']:>12,.0f}{row['page_ms']:>11,.1f}"
            f"{row['floor_ms']:>10,.1f}{row['ratio_to_floor']:>9,.1f}×"
        )
    measured = [r for r in rows if r["status"] == "measured"]
    at_1000 = next((r for r in measured if r["turns"] == 1_000), None)
    met = {
        "bytes per turn ≤ 3 KB at every N": len(measured) == len(rows)
        and all(r["bytes_per_turn"] <= BYTES_TARGET for r in measured),
        "1,000 turns under 1 s": at_1000 is not None and at_1000["page_ms"] < SECONDS_TARGET * 1e3,
    }
    for name, ok in met.items():
        print(f"{name}: {'yes' if ok else 'NO'}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "met": met}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
