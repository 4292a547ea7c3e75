"""W3: how long the notebook views take, and how much memory they need at their peak.

Times `turn_frame` (what `run.frame()` calls) on 100,000 turns and `failure_chart` (what
`run.failure_chart()` calls) on 10,000 turns, plus rendering that chart to PNG. Each case is
timed without tracing (best of `--repeat`), then run once more under `tracemalloc` for its
peak. The turns are built before any measurement.

    .venv/bin/python benchmarks/notebook_views.py [--quick] [--repeat N]
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from thena_nb.core.records.report import ReportNode
from thena_nb.core.records.types import ToolCall, Turn, TurnInfo
from thena_nb.notebook.charts import failure_chart, figure_png_b64
from thena_nb.notebook.frames import turn_frame

START = datetime(2026, 1, 1, tzinfo=UTC)


def make_turns(n: int) -> list[Turn]:
    """`n` turns of one loop cycling native/rescued, working/failed and text-only turns."""
    turns = []
    streak = 0
    for i in range(n):
        kind = i % 5
        if kind == 4:
            info = TurnInfo(called_tool=False, response=f"thinking about step {i}")
            calls: list[ToolCall] = []
        else:
            failed = kind in (1, 3)
            source = "native" if kind < 2 else "rescued"
            streak = streak + 1 if failed else 0
            info = TurnInfo(
                called_tool=True,
                tool_name="search",
                tool_error=failed,
                tool_call_source=source,  # type: ignore[arg-type]
                response="" if source == "native" else f'<tool name="search">{i}</tool>',
            )
            calls = [
                ToolCall(
                    id=f"c{i}",
                    name="search",
                    arguments={"q": str(i)},
                    source=source,  # type: ignore[arg-type]
                    ok=not failed,
                    result=None if failed else "ok",
                    error="tool 'search' failed" if failed else None,
                )
            ]
        turns.append(
            Turn(
                index=i,
                step_path="bench/0.loop/0.Executor",
                agent="Executor",
                iteration=i + 1,
                info=info,
                tool_calls=calls,
                finish_reason="tool_use" if calls else "end_turn",
                input_tokens=1000 + i % 97,
                output_tokens=50 + i % 13,
                consecutive_fails=streak,
                started_at=START + timedelta(milliseconds=10 * i),
                duration_s=0.01,
            )
        )
    return turns


def loop_node(n: int) -> ReportNode:
    """A loop node whose agent child ran turns `0..n-1`."""
    agent = ReportNode(
        kind="agent", name="Executor", path="bench/0.loop/0.Executor", turns=list(range(n))
    )
    return ReportNode(
        kind="loop",
        name="loop",
        path="bench/0.loop",
        children=[agent],
        stop_reason="exhausted",
        iterations=n,
        max_iterations=n,
        max_fails=5,
    )


def measure(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """Best wall time in seconds over `repeat` runs, and the peak traced memory in MiB."""
    fn()  # warm up imports and caches
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return best, peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the turns, one repeat")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per case (best wins)")
    args = parser.parse_args()
    frame_n, chart_n = (10_000, 1_000) if args.quick else (100_000, 10_000)
    repeat = 1 if args.quick else args.repeat

    frame_turns = make_turns(frame_n)
    chart_turns = frame_turns[:chart_n]
    loops = [loop_node(chart_n)]

    cases: list[tuple[str, int, Callable[[], Any]]] = [
        ("turn_frame", frame_n, lambda: turn_frame(frame_turns)),
        ("failure_chart", chart_n, lambda: failure_chart(chart_turns, loops)),
        (
            "failure_chart + PNG",
            chart_n,
            lambda: figure_png_b64(failure_chart(chart_turns, loops)),
        ),
    ]
    print(f"{'view':<22}{'turns':>9}{'time (s)':>11}{'peak (MiB)':>13}")
    for name, n, fn in cases:
        seconds, peak = measure(fn, repeat)
        print(f"{name:<22}{n:>9,}{seconds:>11.3f}{peak:>13.1f}")


if __name__ == "__main__":
    main()
