"""What tracing costs per turn: the W1 tool loop uninstrumented and instrumented.

The W1 loop (`turn_overhead.tool_loop(n)`, no store) runs round by round in three modes so
that a busy machine slows them alike:

- `off`: `thena_nb.telemetry` not instrumented (the engine's hook slots stay `None`);
- `spans`: `telemetry.instrument(provider)` with an SDK `TracerProvider` whose
  `SimpleSpanProcessor` hands every span to an `InMemorySpanExporter` (cleared per run);
- `content`: the same with `capture_content=True` (messages serialised to JSON each call).

"adds" is the mode's CPU µs per turn minus `off`'s. A turn of this loop makes four spans
(`invoke_agent`, `chat`, `execute_tool`, and its share of the run and loop spans).

    python benchmarks/telemetry_cost.py            # N = 200
    python benchmarks/telemetry_cost.py --quick    # fewer rounds
    python benchmarks/telemetry_cost.py --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from benchmarks.turn_overhead import run_once, tool_loop
from thena_nb import telemetry

MODES = ("off", "spans", "content")


def _set_mode(mode: str, provider: TracerProvider) -> None:
    if mode == "off":
        telemetry.uninstrument()
    else:
        telemetry.instrument(provider, capture_content=mode == "content")


def measure(n: int, rounds: int) -> dict[str, Any]:
    """Median CPU and wall µs per turn of each mode over `rounds` interleaved rounds."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    wf = tool_loop(n)
    samples: dict[str, list[tuple[float, float]]] = {m: [] for m in MODES}
    spans_per_run: dict[str, int] = {}

    async def all_rounds() -> None:
        for r in range(rounds + 1):  # round 0 warms up
            for mode in MODES:
                _set_mode(mode, provider)
                exporter.clear()
                gc.collect()
                wall, cpu = await run_once(wf, n)
                spans_per_run[mode] = len(exporter.get_finished_spans())
                if r:
                    samples[mode].append((wall, cpu))
        telemetry.uninstrument()

    asyncio.run(all_rounds())
    rows = {}
    for mode in MODES:
        cpu = statistics.median(c for _, c in samples[mode]) / n * 1e6
        wall = statistics.median(w for w, _ in samples[mode]) / n * 1e6
        rows[mode] = {"cpu_us_per_turn": cpu, "wall_us_per_turn": wall}
        rows[mode]["spans_per_run"] = spans_per_run[mode]
    for mode in MODES[1:]:
        rows[mode]["adds_cpu_us_per_turn"] = (
            rows[mode]["cpu_us_per_turn"] - rows["off"]["cpu_us_per_turn"]
        )
    return {"n": n, "rounds": rounds, "modes": rows}


def main(argv: list[str] | None = None) -> int:
    """Measure N = 200, print a table and optionally write JSON."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    result = measure(200, 3 if args.quick else 15)
    print(f"{'mode':>8} {'CPU µs/turn':>12} {'wall µs/turn':>13} {'adds':>8} {'spans/run':>10}")
    for mode, row in result["modes"].items():
        adds = row.get("adds_cpu_us_per_turn")
        shown = f"{adds:>8.1f}" if adds is not None else f"{'':>8}"
        print(
            f"{mode:>8} {row['cpu_us_per_turn']:>12.1f} {row['wall_us_per_turn']:>13.1f}"
            f" {shown} {row['spans_per_run']:>10}"
        )
    print(f"({time.perf_counter() - t0:.1f} s)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"workload": "W1 telemetry", **result}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
