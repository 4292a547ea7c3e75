"""W1, the tool loop's cost per turn: every configuration and every peer in its own process.

Each (configuration, N) is measured by `python -m benchmarks.w1_child CONFIG N REPEATS` in a
fresh process, `processes` times; a figure is the median over the processes of each process's
median. thena_nb's configurations come first, the default path first (`w1_child.CONFIGS`),
then every installed peer (`peers.PEERS`) called the way its docs show. Times are CPU
(`time.process_time`, the steadier on a shared machine) and wall; N = 1 is shown per run,
every other N per turn. A peer's ratio is its CPU time over the default path's at the same N.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.peers import PEERS, Peer
from benchmarks.w1_child import CODE_ENV, CONFIGS, FLOOR

__all__ = ["FULL", "QUICK", "Plan", "w1"]

ROOT = Path(__file__).resolve().parents[1]
OURS = "thena_nb"
PEER_LIMIT_S = 30.0
"""A peer whose one run at a larger N would take longer than this is not run there."""


@dataclass(frozen=True)
class Plan:
    """Timed runs per process at each N, and how many processes each measurement gets."""

    ours: dict[int, int]
    long: dict[int, int]
    """The stripped configuration only, at large N (its flatness)."""
    peers: dict[int, int]
    processes: int
    peer_processes: int


FULL = Plan(
    ours={1: 200, 20: 60, 200: 15, 2000: 4},
    long={10_000: 3},
    peers={1: 30, 20: 15, 200: 5, 2000: 2},
    processes=3,
    peer_processes=2,
)
QUICK = Plan(
    ours={1: 3, 20: 2, 200: 1}, long={1000: 1}, peers={20: 1}, processes=1, peer_processes=1
)


def _child(config: str, n: int, repeats: int, code: str | None) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop(CODE_ENV, None)
    if code and not config.startswith("peer:"):
        env[CODE_ENV] = code
    cmd = [sys.executable, "-m", "benchmarks.w1_child", config, str(n), str(repeats)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        err = proc.stderr.strip().splitlines()
        raise RuntimeError(err[-1] if err else f"exit code {proc.returncode}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _row(framework: str, config: str, n: int, parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One measurement from its processes' results: medians of per-process medians."""
    per = 1e6 if n == 1 else 1e6 / n
    cpu = statistics.median(statistics.median(p["cpu_s"]) for p in parts) * per
    wall = statistics.median(statistics.median(p["wall_s"]) for p in parts) * per
    calls = {(p["model_calls"], p["tool_calls"]) for p in parts}
    row: dict[str, Any] = {
        "framework": framework,
        "config": config,
        "n": n,
        "status": "measured",
        "note": "",
        "processes": len(parts),
        "samples": sum(len(p["cpu_s"]) for p in parts),
        "unit": "µs per run" if n == 1 else "µs per turn",
        "median_cpu_us_per_turn": cpu,  # at N = 1 a run is one turn
        "median_wall_us_per_turn": wall,
        "median_cpu_us": cpu,
        "median_wall_us": wall,
        "best_cpu_us": min(min(p["cpu_s"]) for p in parts) * per,
        "median_run_s": statistics.median(statistics.median(p["wall_s"]) for p in parts),
        "model_calls": n,
        "tool_calls": n - 1,
        "verified": calls == {(n, n - 1)},
    }
    if "versions" in parts[0]:
        row["versions"] = parts[0]["versions"]
    if "thena_nb" in parts[0]:
        row["code"] = parts[0]["thena_nb"]
    return row


def _measure(
    framework: str, config: str, n: int, repeats: int, processes: int, code: str | None
) -> dict[str, Any]:
    try:
        parts = [_child(config, n, repeats, code) for _ in range(processes)]
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        if framework == OURS:
            raise
        return {
            "framework": framework,
            "config": config,
            "n": n,
            "status": "error",
            "note": str(exc),
        }
    return _row(framework, config, n, parts)


def _too_slow(rows: list[dict[str, Any]], name: str, n: int) -> str | None:
    """Why peer `name` is not run at `n`, judged from its largest N measured so far."""
    done = [r for r in rows if r["framework"] == name and "median_run_s" in r and r["n"] > 1]
    if len(done) < 2:
        return None
    small, big = done[-2], done[-1]
    growth = max(1.0, big["median_cpu_us"] / small["median_cpu_us"])
    estimate = big["median_run_s"] * (n / big["n"]) * growth
    if estimate <= PEER_LIMIT_S:
        return None
    return (
        f"one run at N={n:,} would take about {estimate:,.0f} s (> {PEER_LIMIT_S:.0f} s; "
        f"µs/turn grew {growth:.1f}× from N={small['n']:,} to N={big['n']:,})"
    )


def _peer_rows(peer: Peer, plan: Plan, log: Callable[[str], None]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for n, repeats in plan.peers.items():
        reason = _too_slow(rows, peer.name, n)
        if reason is not None:
            rows.append(
                {"framework": peer.name, "config": f"peer:{peer.name}", "n": n}
                | {"status": "skipped", "note": reason}
            )
            continue
        log(f"W1 {peer.name} N={n:,}")
        rows.append(_measure(peer.name, f"peer:{peer.name}", n, repeats, plan.peer_processes, None))
    return rows


def _checks(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """W1's targets, each judged on CPU medians."""
    ours = {(r["config"], r["n"]): r["median_cpu_us"] for r in rows if r["framework"] == OURS}
    checks = []

    def check(target: str, value: float | None, limit: float, at_least: bool = False) -> None:
        if value is not None:
            ok = value >= limit if at_least else value <= limit
            checks.append({"target": target, "value": value, "limit": limit, "ok": ok})

    check("default path, N=200: µs per turn (CPU)", ours.get(("default", 200)), 75.0)
    check(
        "default path, N=20: µs per turn (CPU, set-up included)", ours.get(("default", 20)), 120.0
    )
    check("default path, one-turn run: µs per run (CPU)", ours.get(("default", 1)), 400.0)
    check("stripped, N=200: µs per turn (CPU)", ours.get(("stripped", 200)), 20.0)
    for n, limit in ((200, 1.5), (20, 2.0)):
        default = next((r for r in rows if r["config"] == "default" and r["n"] == n), None)
        if default is not None and "ratio_floor_cpu" in default:
            check(f"default path ÷ floor, N={n}: ratio (CPU)", default["ratio_floor_cpu"], limit)
    long = max((n for c, n in ours if c == "stripped"), default=None)
    if long and long > 200 and ("stripped", 200) in ours:
        ratio = ours[("stripped", long)] / ours[("stripped", 200)]
        check(f"stripped, N={long:,} ÷ N=200 (CPU µs per turn)", ratio, 1.3)
    for n, want in ((200, 15.0), (20, 3.0)):
        smol = next(
            (
                r
                for r in rows
                if r["framework"] == "smolagents" and r["n"] == n and "ratio_cpu" in r
            ),
            None,
        )
        if smol is not None:
            check(f"smolagents ÷ default path, N={n}: ratio (CPU)", smol["ratio_cpu"], want, True)
    return checks


def _floor_ratios(rows: list[dict[str, Any]]) -> None:
    """Set `ratio_floor_cpu` and `ratio_floor_wall` on thena_nb's rows: each ÷ the floor."""
    floor = {r["n"]: r for r in rows if r["framework"] == FLOOR and "median_cpu_us" in r}
    for r in rows:
        if r["framework"] == OURS and "median_cpu_us" in r and r["n"] in floor:
            r["ratio_floor_cpu"] = r["median_cpu_us"] / floor[r["n"]]["median_cpu_us"]
            r["ratio_floor_wall"] = r["median_wall_us"] / floor[r["n"]]["median_wall_us"]


def w1(
    *, quick: bool, log: Callable[[str], None] = print, code: str | None = None, peers: bool = True
) -> dict[str, Any]:
    """W1: thena_nb's configurations (from `code`, a checkout, if given) and the peers."""
    plan = QUICK if quick else FULL
    rows: list[dict[str, Any]] = []
    for config in CONFIGS:
        sizes = dict(plan.ours) | (plan.long if config == "stripped" else {})
        for n, repeats in sizes.items():
            log(f"W1 {config} N={n:,}")
            rows.append(_measure(OURS, config, n, repeats, plan.processes, code))
    for n, repeats in plan.ours.items():
        log(f"W1 floor N={n:,}")
        rows.append(_measure(FLOOR, FLOOR, n, repeats, plan.processes, None))
    notes = [f"{c}: {d}" for c, d in CONFIGS.items()]
    notes.append(
        "floor: the loop by hand, one SQLite INSERT and commit a turn (benchmarks/floor_loop.py);"
        " (N× floor) is thena_nb ÷ floor, a peer's (N×) is peer ÷ default path, by CPU"
    )
    if code:
        notes.append(f"thena_nb imported from {code}")
    for peer in PEERS if peers else []:
        missing = peer.missing()
        if missing:
            notes.append(
                f"{peer.name} skipped: not installed (needs {', '.join(missing)}; "
                f'pip install -e ".[bench]")'
            )
            continue
        rows += _peer_rows(peer, plan, log)
    default = {r["n"]: r for r in rows if r["config"] == "default"}
    _floor_ratios(rows)
    for r in rows:
        if r["framework"] not in (OURS, FLOOR) and "median_cpu_us" in r and r["n"] in default:
            r["ratio_cpu"] = r["median_cpu_us"] / default[r["n"]]["median_cpu_us"]
            r["ratio_wall"] = r["median_wall_us"] / default[r["n"]]["median_wall_us"]
        if r["status"] != "measured" and r.get("note"):
            notes.append(f"{r['framework']} at N={r['n']:,}: {r['note']}")
    if quick and peers:
        notes.append(f"quick run: the peers run at N={', '.join(map(str, plan.peers))} only")
    return {
        "workload": "W1",
        "title": "the tool loop's cost per turn, each configuration in its own process",
        "frameworks": [OURS, *(p.name for p in PEERS)] if peers else [OURS],
        "floor": FLOOR,
        "configs": dict(CONFIGS),
        "plan": {"processes": plan.processes, "peer_processes": plan.peer_processes},
        "rows": rows,
        "checks": _checks(rows),
        "notes": notes,
    }
