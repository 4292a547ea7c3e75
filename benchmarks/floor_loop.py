"""W15: the default path against a floor loop: W1's tool loop written by hand.

The floor is what any program running W1's loop and keeping it pays: a list of messages
(dicts), the same model function as W1 (`turn_overhead.function_loop`: it decides from the
number of messages it is sent, call `i` sees `2i + 1`), the same tool (`turn_overhead.add`,
its function called directly), and per turn one SQLite `INSERT` of the turn (the model's
reply and the tool's result) as JSON and one commit, on a file in WAL mode with
`synchronous=NORMAL`, as the run store uses it. The connection is opened once per process,
as the default store is.

The subject is W1's default path: a sync `FunctionModel`, rescue on, the default store (an
SQLite file in a temporary directory, named by `THENA_NB_STORE` as the README documents),
`wf.run`. Both run in this one process, warmed up, alternating run by run over the rounds,
each run after a `gc.collect()`; the figures are medians of CPU time (`time.process_time`,
the store's threads included) and of wall time, and their ratio. Then each is counted in
instructions under callgrind, the same way for both (`turn_instructions`: two launches of
A and B runs after the same warm-up, collector off, `PYTHONHASHSEED` fixed;
`(count B - count A) / ((B - A) * N)` per turn).

Targets (reported, not asserted): default ÷ floor ≤ 1.5× at N=200 and ≤ 2× at N=20.

    python benchmarks/floor_loop.py                    # N = 20 and 200, CPU and instructions
    python benchmarks/floor_loop.py --quick            # fewer rounds, no callgrind
    python benchmarks/floor_loop.py --no-instructions --json out.json
    python benchmarks/floor_loop.py --profile /tmp/default.prof   # cProfile the default path
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.import_cost import child_env, counted_per_turn
from benchmarks.turn_overhead import add, function_loop

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {200: 1.5, 20: 2.0}
"""Default path ÷ floor, at most, by N."""
WARMUPS = 3
"""Runs before the counted ones, as `turn_instructions` makes."""
_ADD = add.fn
_SCHEMA = "CREATE TABLE IF NOT EXISTS turns (run_id TEXT, turn INTEGER, body TEXT)"
_INSERT = "INSERT INTO turns (run_id, turn, body) VALUES (?, ?, ?)"


def connect(path: str | Path) -> sqlite3.Connection:
    """The floor's connection: WAL, `synchronous=NORMAL`, one table of turns."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(_SCHEMA)
    conn.commit()
    return conn


def decide(messages: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """W1's model function on a list of messages: `add(i, 1)` until call `n - 1`, then
    "done"."""
    i = len(messages) // 2
    if i < n - 1:
        call = {"id": f"call-{i}", "name": "add", "arguments": {"a": i, "b": 1}}
        return {"role": "assistant", "content": "", "tool_calls": [call]}
    return {"role": "assistant", "content": "done", "tool_calls": []}


def floor_run(conn: sqlite3.Connection, n: int, prompt: str = "go") -> list[dict[str, Any]]:
    """One W1 run by hand: `n` model calls, `n - 1` tool calls, a committed INSERT a turn.

    Raises:
        AssertionError: The run did not end with "done" after `n` turns.
    """
    run_id = uuid.uuid4().hex
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    for index in range(n):
        answer = decide(messages, n)
        messages.append(answer)
        results = []
        for call in answer["tool_calls"]:
            value = _ADD(**call["arguments"])
            results.append({"role": "tool", "tool_call_id": call["id"], "content": str(value)})
        messages.extend(results)
        turn = {"index": index, "reply": answer, "results": results}
        conn.execute(_INSERT, (run_id, index, json.dumps(turn)))
        conn.commit()
        if not answer["tool_calls"]:
            break
    if len(messages) != 2 * n or messages[-1]["content"] != "done":
        raise AssertionError(f"floor N={n}: {len(messages)} messages")
    return messages


def _jobs(n: int, tmp: str) -> tuple[dict[str, Callable[[], Any]], sqlite3.Connection]:
    os.environ["THENA_NB_STORE"] = os.path.join(tmp, "runs.sqlite3")
    conn = connect(os.path.join(tmp, "floor.sqlite3"))
    wf = function_loop(n)

    def default() -> Any:
        run = wf.run("go")
        if (run.usage.model_calls, run.usage.tool_calls) != (n, n - 1):
            raise AssertionError(f"default N={n}: {run.usage.model_calls} model calls")
        return run

    return {"floor": lambda: floor_run(conn, n), "default": default}, conn


def measure(n: int, rounds: int) -> dict[str, Any]:
    """Median CPU and wall µs per turn of the floor and of the default path at `n` turns,
    alternating run by run in this process, and their ratios."""
    times: dict[str, list[tuple[float, float]]] = {"floor": [], "default": []}
    with tempfile.TemporaryDirectory(prefix="w15-") as tmp:
        jobs, conn = _jobs(n, tmp)
        for job in jobs.values():  # warm-up: imports, caches, the store's set-up
            for _ in range(WARMUPS):
                job()
        kept: Any = None
        for _ in range(rounds):
            for name, job in jobs.items():
                kept = None
                gc.collect()
                c0, w0 = time.process_time(), time.perf_counter()
                kept = job()
                times[name].append((time.process_time() - c0, time.perf_counter() - w0))
        del kept
        conn.close()
    out: dict[str, Any] = {"n": n, "rounds": rounds}
    for name, values in times.items():
        out[f"{name}_cpu_us"] = statistics.median(c for c, _ in values) * 1e6 / n
        out[f"{name}_wall_us"] = statistics.median(w for _, w in values) * 1e6 / n
    out["ratio_cpu"] = out["default_cpu_us"] / out["floor_cpu_us"]
    out["ratio_wall"] = out["default_wall_us"] / out["floor_wall_us"]
    return out


def child(subject: str, n: int, runs: int) -> dict[str, Any]:
    """One callgrind launch: `WARMUPS` runs, then `runs` with the collector off."""
    with tempfile.TemporaryDirectory(prefix="w15-instructions-") as tmp:
        jobs, conn = _jobs(n, tmp)
        job = jobs[subject]
        for _ in range(WARMUPS):
            job()
        gc.collect()
        gc.disable()
        try:
            for _ in range(runs):
                job()
        finally:
            gc.enable()
        conn.close()
    return {"subject": subject, "n": n, "runs": runs, "model_calls": n, "tool_calls": n - 1}


def instructions_per_turn(subject: str, n: int, runs: tuple[int, int]) -> dict[str, Any]:
    """Instructions per turn of `subject` ("floor" or "default") at `n` turns, counted as
    `turn_instructions.per_turn` counts them.

    Raises:
        SystemExit: valgrind is not installed.
    """
    env = child_env(ROOT)
    env["PYTHONHASHSEED"] = "0"
    args = [sys.executable, "-m", "benchmarks.floor_loop", "--child", subject]
    counts, per = counted_per_turn(args, env, n, runs)
    return {"subject": subject, "n": n, "runs": list(runs), "instructions": counts, "per_turn": per}


def counted(n: int, runs: tuple[int, int]) -> dict[str, Any]:
    """Floor and default path at `n`, counted one after the other; their ratio."""
    floor = instructions_per_turn("floor", n, runs)
    default = instructions_per_turn("default", n, runs)
    ratio = default["per_turn"] / floor["per_turn"]
    return {"n": n, "floor": floor, "default": default, "ratio": ratio}


def _profile(n: int, runs: int, path: str) -> None:
    import cProfile

    with tempfile.TemporaryDirectory(prefix="w15-profile-") as tmp:
        jobs, conn = _jobs(n, tmp)
        for _ in range(WARMUPS):
            jobs["default"]()
        profiler = cProfile.Profile(time.thread_time)  # CPU time: a busy machine distorts less
        profiler.enable()
        for _ in range(runs):
            jobs["default"]()
        profiler.disable()
        conn.close()
    profiler.dump_stats(path)
    print(f"cProfile of {runs} default-path runs at N={n} written to {path}")


def render(rows: list[dict[str, Any]], counts: list[dict[str, Any]]) -> str:
    """The table: per N, floor and default (CPU | wall µs per turn), the ratios, targets."""
    lines = [
        "W1 by hand (floor) against the default path; µs per turn, medians, alternating",
        f"{'N':>5} {'floor CPU|wall':>16} {'default CPU|wall':>18} {'CPU ratio':>10} "
        f"{'wall ratio':>10} {'target':>7}",
    ]
    for r in rows:
        fl = f"{r['floor_cpu_us']:.1f} | {r['floor_wall_us']:.1f}"
        de = f"{r['default_cpu_us']:.1f} | {r['default_wall_us']:.1f}"
        lines.append(
            f"{r['n']:>5} {fl:>16} {de:>18} {r['ratio_cpu']:>9.2f}x {r['ratio_wall']:>9.2f}x "
            f"{'<= ' + str(TARGETS.get(r['n'], '')):>7}"
        )
    if counts:
        lines.append("instructions per turn under callgrind:")
        lines.append(f"{'N':>5} {'floor':>12} {'default':>12} {'ratio':>8}")
        for c in counts:
            floor, default = c["floor"]["per_turn"], c["default"]["per_turn"]
            lines.append(f"{c['n']:>5} {floor:>12,.0f} {default:>12,.0f} {c['ratio']:>7.2f}x")
    return "\n".join(lines)


def _met(rows: list[dict[str, Any]], counts: list[dict[str, Any]]) -> dict[str, bool]:
    met = {}
    for r in rows:
        if r["n"] in TARGETS:
            met[f"N={r['n']}: default CPU <= {TARGETS[r['n']]}x floor"] = (
                r["ratio_cpu"] <= TARGETS[r["n"]]
            )
    for c in counts:
        if c["n"] in TARGETS:
            met[f"N={c['n']}: default instructions <= {TARGETS[c['n']]}x floor"] = (
                c["ratio"] <= TARGETS[c["n"]]
            )
    return met


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table, optionally write JSON (or, with `--child`, be one launch)."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        if len(args) != 4 or args[1] not in ("floor", "default"):
            raise SystemExit("usage: --child {floor,default} N RUNS")
        print(json.dumps(child(args[1], int(args[2]), int(args[3]))))
        return 0
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, no callgrind")
    parser.add_argument("--n", type=int, action="append", help="turns per run (20 and 200)")
    parser.add_argument("--rounds", type=int, help="alternating rounds (N=20: 101, else 31)")
    parser.add_argument("--no-instructions", action="store_true", help="skip callgrind")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--profile", help="cProfile 20 default-path runs at the (first) N")
    opts = parser.parse_args(args)
    sizes = opts.n or [20, 200]
    if opts.profile:
        _profile(sizes[0], 20, opts.profile)
        return 0
    rows = []
    for n in sizes:
        rounds = opts.rounds or ((7 if n <= 20 else 3) if opts.quick else (101 if n <= 20 else 31))
        rows.append(measure(n, rounds))
    counts: list[dict[str, Any]] = []
    note = ""
    if opts.quick or opts.no_instructions:
        note = "instructions not counted (--quick or --no-instructions)"
    elif shutil.which("valgrind") is None:
        note = "instructions not counted: valgrind is not installed"
    else:
        counts = [counted(n, (1, 5)) for n in sizes]
    print(render(rows, counts))
    if note:
        print(note)
    met = _met(rows, counts)
    for name, ok in met.items():
        print(f"target {name}: {'met' if ok else 'MISSED'}")
    if opts.json:
        with open(opts.json, "w") as fh:
            report = {"workload": "W15", "rows": rows, "instructions": counts, "met": met}
            json.dump(report | {"targets": TARGETS, "note": note}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
