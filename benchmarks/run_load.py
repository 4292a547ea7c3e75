"""W13: opening a stored run: `Run.load` of a 10,000-turn W1 run against its floor.

The run is W1's default path (`turn_overhead.function_loop(n)`: sync FunctionModel, rescue
on) stored in a `SqliteRunStore` on a fresh file; the process then drops it, so that only
the loaded copies are in memory. The floor is what any reader of that file pays: `SELECT`
the run's rows (its header, its turn rows and its request parts, with the statements the
store itself runs) on a connection of its own and `json.loads` every JSON text in them,
one by one. Floor and `Run.load` alternate round by round, in this process, so that a busy
machine slows them alike; each round starts after a `gc.collect()`, and the result of the
round before is dropped first. Times are medians of CPU time (`time.process_time`), wall
time beside them.

"Settled" adds a collection of the two young generations (`gc.collect(1)`) to each: the
collector's work on the new objects that a load leaves for later (it holds off full
collections while it decodes, `decoding`) is then counted too. Target: `Run.load` within 2x
the floor.

    python benchmarks/run_load.py             # 10,000 turns, 9 rounds
    python benchmarks/run_load.py --quick     # 2,000 turns, 3 rounds
    python benchmarks/run_load.py --json out.json
"""

from __future__ import annotations

import argparse
import gc
import json
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
from thena_nb import Run
from thena_nb.core.store import sqlite as sqlite_store
from thena_nb.store import SqliteRunStore

TARGET = 2.0
"""`Run.load` CPU time ÷ the floor's, at most."""
JSON_COLUMNS = ("usage", "stop_reasons", "output", "state", "pending", "history", "report")


def store_run(path: Path, turns: int) -> str:
    """Store one W1 run of `turns` turns in a new file at `path`; its run id."""
    with SqliteRunStore.from_path(path) as store:
        run = function_loop(turns).run("go", store=store)
        assert len(run.turns) == turns and run.status == "finished", run.status
        return run.run_id


def floor(conn: sqlite3.Connection, run_id: str) -> list[Any]:
    """The run's rows, selected as the store selects them, and every JSON text decoded."""
    # The store's own statements (a finished run: its messages are in the history).
    header_sql, parts_sql = sqlite_store._SELECT_HEADER, sqlite_store._SELECT_PARTS
    turns_sql = sqlite_store._SELECT_TURNS.format("NULL")
    conn.execute("BEGIN")
    try:
        row = conn.execute(header_sql, (run_id,)).fetchone()
        rows = conn.execute(turns_sql, (run_id,)).fetchall()
        parts = conn.execute(parts_sql, (run_id,)).fetchall()
    finally:
        conn.rollback()
    columns = sqlite_store._HEADER_COLUMNS
    header = [json.loads(row[columns.index(c)] or "null") for c in JSON_COLUMNS]
    turns = [(json.loads(t), json.loads(s) if s is not None else None) for _, t, s, _ in rows]
    return [header, turns, [json.loads(v) for _, v in parts]]


def _round(fn: Callable[[], Any], settle: bool) -> tuple[float, float, Any]:
    gc.collect()
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    if settle:
        gc.collect(1)
    return time.process_time() - c0, time.perf_counter() - w0, out


def measure(turns: int, rounds: int, path: Path) -> dict[str, Any]:
    """Median CPU and wall seconds of the floor and of `Run.load`, plain and settled."""
    run_id = store_run(path, turns)
    gc.collect()
    conn = sqlite3.connect(path, isolation_level=None)
    times: dict[str, list[tuple[float, float]]] = {
        k: [] for k in ("floor", "load", "floor_settled", "load_settled")
    }
    with SqliteRunStore.from_path(path) as store:
        jobs: dict[str, Callable[[], Any]] = {
            "floor": lambda: floor(conn, run_id),
            "load": lambda: Run.load(run_id, store=store),
        }
        loaded = Run.load(run_id, store=store)  # warm-up, and a check of what it reads
        assert len(loaded.turns) == turns and len(loaded.history) == 2 * turns, turns
        floor(conn, run_id)
        del loaded
        kept: Any = None
        for _ in range(rounds):
            for name in times:
                kept = None  # the round before's result goes before this round starts
                cpu, wall, kept = _round(jobs[name.split("_")[0]], name.endswith("settled"))
                times[name].append((cpu, wall))
        del kept
    conn.close()
    out: dict[str, Any] = {"turns": turns, "rounds": rounds}
    for name, values in times.items():
        out[f"{name}_cpu_s"] = statistics.median(c for c, _ in values)
        out[f"{name}_wall_s"] = statistics.median(w for _, w in values)
    out["ratio_cpu"] = out["load_cpu_s"] / out["floor_cpu_s"]
    out["ratio_wall"] = out["load_wall_s"] / out["floor_wall_s"]
    out["ratio_settled_cpu"] = out["load_settled_cpu_s"] / out["floor_settled_cpu_s"]
    return out


def main(argv: list[str] | None = None) -> int:
    """Measure, print a table and optionally write JSON."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 turns, fewer rounds")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    turns, rounds = (2000, 3) if args.quick else (10_000, 9)
    with tempfile.TemporaryDirectory() as tmp:
        row = measure(turns, rounds, Path(tmp) / "runs.sqlite3")
    print(f"thena_nb from {Path(thena_nb.__file__).parent}")
    print(f"Run.load of a stored {turns:,}-turn W1 run, medians of {rounds} rounds (s):")
    print(f"{'':>9} {'floor':>8} {'load':>8} {'ratio':>7}")
    for label, floor_key, load_key in (
        ("CPU", "floor_cpu_s", "load_cpu_s"),
        ("wall", "floor_wall_s", "load_wall_s"),
        ("settled", "floor_settled_cpu_s", "load_settled_cpu_s"),
    ):
        f, n = row[floor_key], row[load_key]
        print(f"{label:>9} {f:>8.3f} {n:>8.3f} {n / f:>6.2f}x")
    ok = row["ratio_cpu"] <= TARGET
    met = {"load_within_2x_floor": ok}
    print(f"target: load CPU within {TARGET:.0f}x the floor: {'met' if ok else 'MISSED'}")
    if args.json:
        with open(args.json, "w") as fh:
            report = {"workload": "W13", "rows": [row], "target_ratio": TARGET, "met": met}
            json.dump(report, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
