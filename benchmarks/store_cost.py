"""W4: what keeping runs costs: per turn beside the in-memory overhead, and replay.

- Per turn: the W1 tool loop (`turn_overhead.tool_loop(n)`) with no store, with a
  `MemoryRunStore` and with a `SqliteRunStore` on a fresh file; the three run round by round so
  that a busy machine slows them alike. "SQLite adds" is SQLite minus no store, per turn
  (wall, and CPU time of the whole process); "one write" is the median time the executor
  waits in `turn_recorded` for one turn's commit. Target: SQLite adds under 200 µs per turn.
- Replay: a 2,000-turn run kept in SQLite is loaded (`store.load`) and replayed
  (`replay=`: no model call, no tool call). Target: load plus replay under 1 s.

    python benchmarks/store_cost.py             # N = 200 and 2,000
    python benchmarks/store_cost.py --quick     # fewer repeats
    python benchmarks/store_cost.py --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.turn_overhead import tool_loop
from thena_nb.store import MemoryRunStore, RunStore, SqliteRunStore

PER_TURN_TARGET_US = 200.0
REPLAY_TARGET_S = 1.0
REPLAY_TURNS = 2000


async def _timed(wf: Any, n: int, store: RunStore | None) -> tuple[float, float]:
    """Wall and CPU seconds of one run (CPU time counts the store's worker thread too)."""
    gc.collect()
    w0, c0 = time.perf_counter(), time.process_time()
    run = await wf.arun("go", store=store if store is not None else False)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    assert run.usage.model_calls == n and len(run.turns) == n, run.usage
    return wall, cpu


def per_turn(n: int, repeats: int, db: Path) -> dict[str, Any]:
    """Median µs per turn with no store, a memory store and an SQLite store."""
    wf = tool_loop(n)
    memory = MemoryRunStore()
    sqlite = SqliteRunStore(db)
    kinds: dict[str, RunStore | None] = {"none": None, "memory": memory, "sqlite": sqlite}

    async def rounds() -> dict[str, list[tuple[float, float]]]:
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in kinds}
        for _ in range(max(1, repeats // 5)):  # warm-up
            for store in kinds.values():
                await _timed(wf, n, store)
        for _ in range(repeats):
            for kind, store in kinds.items():
                times[kind].append(await _timed(wf, n, store))
        return times

    writes: list[float] = []
    record = sqlite.turn_recorded

    async def timed_record(run: Any, turn: Any) -> None:
        t0 = time.perf_counter()
        await record(run, turn)
        writes.append(time.perf_counter() - t0)

    async def one_timed() -> None:
        sqlite.turn_recorded = timed_record  # type: ignore[method-assign, assignment]
        try:
            for _ in range(max(1, repeats // 5)):
                await _timed(wf, n, sqlite)
        finally:
            del sqlite.turn_recorded

    try:
        times = asyncio.run(rounds())
        asyncio.run(one_timed())
    finally:
        sqlite.close()
    us = {k: statistics.median(w for w, _ in v) / n * 1e6 for k, v in times.items()}
    cpu = {k: statistics.median(c for _, c in v) / n * 1e6 for k, v in times.items()}
    return {
        "n": n,
        "repeats": repeats,
        "none_us_per_turn": us["none"],
        "memory_us_per_turn": us["memory"],
        "sqlite_us_per_turn": us["sqlite"],
        "sqlite_adds_us_per_turn": us["sqlite"] - us["none"],
        "memory_adds_us_per_turn": us["memory"] - us["none"],
        "sqlite_adds_cpu_us_per_turn": cpu["sqlite"] - cpu["none"],
        "turn_recorded_median_us": statistics.median(writes) * 1e6,
    }


def replay(repeats: int, db: Path) -> dict[str, Any]:
    """Seconds to load a stored 2,000-turn run and to replay it (without and with a store)."""
    wf = tool_loop(REPLAY_TURNS)
    model = wf.steps[0].steps[0].model
    store = SqliteRunStore(db)
    try:
        recorded = wf.run("go", store=store)
        calls = len(model.requests)
        loads, replays, stored = [], [], []
        for _ in range(repeats):
            gc.collect()
            t0 = time.perf_counter()
            loaded = store.load(recorded.run_id)
            t1 = time.perf_counter()
            again = wf.run("go", replay=loaded, store=False)
            t2 = time.perf_counter()
            kept = wf.run("go", replay=loaded, store=store)
            t3 = time.perf_counter()
            assert len(model.requests) == calls, "a replay called the model"
            assert all(t.replayed for t in again.turns) and len(again.turns) == REPLAY_TURNS
            assert len(kept.turns) == REPLAY_TURNS and again.history == recorded.history
            loads.append(t1 - t0)
            replays.append(t2 - t1)
            stored.append(t3 - t2)
    finally:
        store.close()
    load_s, replay_s = statistics.median(loads), statistics.median(replays)
    return {
        "turns": REPLAY_TURNS,
        "repeats": repeats,
        "load_s": load_s,
        "replay_s": replay_s,
        "replay_stored_s": statistics.median(stored),
        "load_and_replay_s": load_s + replay_s,
    }


def main(argv: list[str] | None = None) -> int:
    """Measure, print a table and optionally write JSON."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    plan = [(200, 5), (2000, 2)] if args.quick else [(200, 30), (2000, 6)]
    with tempfile.TemporaryDirectory() as tmp:
        rows = [per_turn(n, r, Path(tmp) / f"turns-{n}.sqlite3") for n, r in plan]
        rep = replay(2 if args.quick else 5, Path(tmp) / "replay.sqlite3")

    print(
        f"{'turns':>6} {'no store':>9} {'memory':>9} {'SQLite':>9} {'SQLite adds':>12}"
        f" {'(CPU)':>7} {'one write':>10}"
        f"  µs per turn, medians; target: SQLite adds < {PER_TURN_TARGET_US:.0f}"
    )
    for row in rows:
        print(
            f"{row['n']:>6} {row['none_us_per_turn']:>9.1f} {row['memory_us_per_turn']:>9.1f}"
            f" {row['sqlite_us_per_turn']:>9.1f} {row['sqlite_adds_us_per_turn']:>12.1f}"
            f" {row['sqlite_adds_cpu_us_per_turn']:>7.1f} {row['turn_recorded_median_us']:>10.1f}"
        )
    print(
        f"replay of {rep['turns']:,} turns: load {rep['load_s']:.3f} s + replay "
        f"{rep['replay_s']:.3f} s = {rep['load_and_replay_s']:.3f} s (target < "
        f"{REPLAY_TARGET_S:.0f} s); replay into the store {rep['replay_stored_s']:.3f} s"
    )
    worst = max(row["sqlite_adds_us_per_turn"] for row in rows)
    met = {
        "per_turn": worst < PER_TURN_TARGET_US,
        "replay": rep["load_and_replay_s"] < REPLAY_TARGET_S,
    }
    print(
        f"targets: per turn {'met' if met['per_turn'] else 'MISSED'}, "
        f"replay {'met' if met['replay'] else 'MISSED'}"
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "workload": "W4",
                    "rows": rows,
                    "replay": rep,
                    "targets": {
                        "sqlite_adds_us_per_turn": PER_TURN_TARGET_US,
                        "load_and_replay_s": REPLAY_TARGET_S,
                    },
                    "met": met,
                },
                fh,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
