"""W14: re-running a stored experiment: `wf.map` again when every run is stored (all
reused), against the floor of reading those runs' rows.

The experiment is small W1 runs (`turn_overhead.function_loop(3)`: a sync `FunctionModel`,
rescue on, three turns and two tool calls a run) over `runs // 2` cases and two variants
(the second changes the agent's system prompt), on the default store (`THENA_NB_STORE`
pointed at an SQLite file in a temporary directory). It runs once, live and untimed; then,
round by round and alternating, this process measures

- the floor: what any reader of that file pays for those runs: on a connection of its own,
  `SELECT` every stored row of them (each run's header with its history and report, its
  turn rows, its request parts; in bulk, `run_id IN (...)` a chunk at a time) and
  `json.loads` every JSON text in them, one by one, with no full collection (as
  `Run.load` decodes, `decoding`: the decoded rows are no garbage);
- the re-run: the same `wf.map` again (a new `Workflow` each round, built as the first was),
  every run taken from the store (`exp.reused == runs` is checked), then `exp.frame()`.

Each round starts after a `gc.collect()`, with the result of the round before dropped.
Times are medians of CPU time (`time.process_time`, every thread), wall time beside them.
Target: the re-run within 5x the floor.

    python benchmarks/stored_experiment.py             # 2,000 runs, 7 rounds
    python benchmarks/stored_experiment.py --quick     # 400 runs, 3 rounds
    python benchmarks/stored_experiment.py --runs 40 --rounds 1 --json out.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import thena_nb
from benchmarks.turn_overhead import function_loop
from thena_nb import Workflow
from thena_nb.core.store import sqlite as sqlite_store
from thena_nb.core.store.base import decoding

TARGET = 5.0
"""The re-run's CPU time ÷ the floor's, at most."""
TURNS = 3
"""Turns per run (two tool calls)."""
VARIANTS: dict[str, Any] = {"plain": {}, "brief": {"Calc": {"system": "Be brief."}}}
_CHUNK = 500
"""Run ids per floor statement (as the store looks runs up)."""
_HEADER_JSON = ("usage", "stop_reasons", "output", "state", "pending", "history", "report")


def workflow(turns: int = TURNS) -> Workflow:
    """The experiment's workflow, built afresh (as a notebook cell run again would)."""
    return function_loop(turns)


def cases(runs: int) -> list[str]:
    """The inputs: one per pair of runs (each runs under both variants)."""
    return [f"case {i}" for i in range(max(1, runs // len(VARIANTS)))]


def run_once(inputs: list[str], turns: int = TURNS) -> Any:
    """The experiment (`wf.map` on the default store)."""
    return workflow(turns).map(inputs, variants=VARIANTS, progress=False)


def floor(conn: sqlite3.Connection, run_ids: list[str]) -> list[list[Any]]:
    """Every stored row of `run_ids`, selected in bulk, and every JSON text decoded with no
    full collection (as `Run.load` decodes, `decoding`: what is decoded is no garbage): the
    headers' JSON columns, the turns (with their states) and the request parts."""
    with decoding():
        return _floor(conn, run_ids)


def _floor(conn: sqlite3.Connection, run_ids: list[str]) -> list[list[Any]]:
    header_columns = ", ".join(sqlite_store._HEADER_COLUMNS)
    wanted = [sqlite_store._HEADER_COLUMNS.index(c) for c in _HEADER_JSON]
    headers: list[Any] = []
    turns: list[Any] = []
    parts: list[Any] = []
    conn.execute("BEGIN")
    try:
        for start in range(0, len(run_ids), _CHUNK):
            chunk = run_ids[start : start + _CHUNK]
            marks = ", ".join("?" * len(chunk))
            header_rows = conn.execute(
                f"SELECT {header_columns} FROM thena_runs WHERE run_id IN ({marks})", chunk
            ).fetchall()
            turn_rows = conn.execute(
                "SELECT r.run_id, t.turn, t.state FROM thena_runs r JOIN thena_turn_rows t "
                f"ON {sqlite_store._RUN_TURNS} WHERE r.run_id IN ({marks}) "
                "ORDER BY t.turn_key",
                chunk,
            ).fetchall()
            part_rows = conn.execute(
                f"SELECT run_id, key, value FROM thena_request_parts WHERE run_id IN ({marks})",
                chunk,
            ).fetchall()
            for row in header_rows:
                headers.append([json.loads(row[i]) if row[i] is not None else None for i in wanted])
            for _, turn, state in turn_rows:
                turns.append((json.loads(turn), json.loads(state) if state is not None else None))
            parts.extend(json.loads(value) for _, _, value in part_rows)
    finally:
        conn.rollback()
    return [headers, turns, parts]


def rerun(inputs: list[str], runs: int, turns: int = TURNS) -> Any:
    """The experiment again, every run taken from the store, and its frame."""
    exp = run_once(inputs, turns)
    assert exp.reused == runs, (exp.reused, runs)
    return exp, exp.frame()


def _round(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    gc.collect()
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.process_time() - c0, time.perf_counter() - w0, out


def measure(runs: int, rounds: int, path: Path, turns: int = TURNS) -> dict[str, Any]:
    """Median CPU and wall seconds of the floor and of the re-run, and their ratios."""
    os.environ["THENA_NB_STORE"] = str(path)
    inputs = cases(runs)
    runs = len(inputs) * len(VARIANTS)
    c0, w0 = time.process_time(), time.perf_counter()
    first = run_once(inputs, turns)  # live, untimed but for the record
    live_cpu, live_wall = time.process_time() - c0, time.perf_counter() - w0
    assert first.reused == 0 and len(first.run_ids) == runs, first.reused
    assert set(first.frame()["status"]) == {"finished"}
    run_ids = list(first.run_ids)
    del first
    conn = sqlite3.connect(path, isolation_level=None)
    jobs: dict[str, Callable[[], Any]] = {
        "floor": lambda: floor(conn, run_ids),
        "rerun": lambda: rerun(inputs, runs, turns),
    }
    headers, turn_rows, _ = floor(conn, run_ids)  # warm-up, and a check of what it reads
    assert (len(headers), len(turn_rows)) == (runs, runs * turns), (len(headers), len(turn_rows))
    del headers, turn_rows
    rerun(inputs, runs, turns)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in jobs}
    kept: Any = None
    for _ in range(rounds):
        for name, job in jobs.items():
            kept = None  # the round before's result goes before this round starts
            cpu, wall, kept = _round(job)
            times[name].append((cpu, wall))
    del kept
    conn.close()
    out: dict[str, Any] = {"runs": runs, "turns_per_run": turns, "rounds": rounds}
    out["live_cpu_s"], out["live_wall_s"] = live_cpu, live_wall
    for name, values in times.items():
        out[f"{name}_cpu_s"] = statistics.median(c for c, _ in values)
        out[f"{name}_wall_s"] = statistics.median(w for _, w in values)
    out["ratio_cpu"] = out["rerun_cpu_s"] / out["floor_cpu_s"]
    out["ratio_wall"] = out["rerun_wall_s"] / out["floor_wall_s"]
    return out


def main(argv: list[str] | None = None) -> int:
    """Measure, print a table and optionally write JSON."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="400 runs, 3 rounds")
    parser.add_argument("--runs", type=int, help="runs in the experiment (even; default 2,000)")
    parser.add_argument("--rounds", type=int, help="timed rounds (default 7)")
    parser.add_argument("--turns", type=int, default=TURNS, help=f"turns per run (default {TURNS})")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    runs, rounds = (400, 3) if args.quick else (2000, 7)
    runs, rounds = args.runs or runs, args.rounds or rounds
    if runs < 2 or rounds < 1 or args.turns < 1:
        parser.error("--runs must be at least 2, --rounds and --turns at least 1")
    with tempfile.TemporaryDirectory() as tmp:
        row = measure(runs, rounds, Path(tmp) / "runs.sqlite3", args.turns)
    print(f"thena_nb from {Path(thena_nb.__file__).parent}")
    print(
        f"a stored experiment of {row['runs']:,} runs ({args.turns} turns each) run again, "
        f"all reused; medians of {rounds} rounds (s):"
    )
    print(f"{'':>5} {'floor':>8} {'re-run':>8} {'ratio':>7}")
    for label in ("cpu", "wall"):
        f, r = row[f"floor_{label}_s"], row[f"rerun_{label}_s"]
        print(f"{label.upper() if label == 'cpu' else label:>5} {f:>8.3f} {r:>8.3f} {r / f:>6.2f}x")
    print(f"(the first, live run took {row['live_cpu_s']:.2f} s CPU, {row['live_wall_s']:.2f} s)")
    ok = row["ratio_cpu"] <= TARGET
    met = {"rerun_within_5x_floor": ok}
    print(f"target: re-run CPU within {TARGET:.0f}x the floor: {'met' if ok else 'MISSED'}")
    if args.json:
        with open(args.json, "w") as fh:
            report = {"workload": "W14", "rows": [row], "target_ratio": TARGET, "met": met}
            json.dump(report, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
