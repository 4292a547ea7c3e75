"""Run every benchmark workload, print one table, and write the figures as JSON.

    python -m benchmarks                      # everything, full repeats (a few minutes)
    python -m benchmarks --quick              # fewer repeats and smaller inputs
    python -m benchmarks --only W1,W2,W5      # some workloads
    python -m benchmarks --json out.json      # elsewhere than benchmarks/results/latest.json

W1 measures thena_nb's default path (sync FunctionModel, rescue on, the default SQLite store,
`wf.run`), then lighter configurations, then pydantic-ai, LangGraph, smolagents and the OpenAI
Agents SDK when they are installed (`pip install -e ".[bench]"`; a missing one is skipped with
a note), each configuration in processes of its own. Times are medians; W1 shows CPU time
(`time.process_time`) beside wall time, and its targets are judged on CPU time, which a busy
machine disturbs less. W9 runs the same loop through the real adapters (`OpenAICompatModel`,
`AnthropicModel` and their SDKs) against a server on 127.0.0.1 (`benchmarks/adapter_turn.py`);
W10 streams one long answer through `OpenAICompatModel` (`benchmarks/stream_reply.py`);
W12 writes a W1 run's page (`run.to_html`) at 100, 1,000 and 5,000 turns
(`benchmarks/page_size.py`); W13 loads a stored 10,000-turn W1 run (`Run.load`) against
selecting its rows and decoding their JSON (`benchmarks/run_load.py`); W14 runs a stored
2,000-run experiment again, every run reused, against selecting and decoding those runs'
rows (`benchmarks/stored_experiment.py`); W15 the default path against W1's loop written by
hand (the floor), by CPU time and by instructions under callgrind (`benchmarks/floor_loop.py`);
W16 experiments (`wf.map`, with and without its store, pydantic-evals' `Dataset.evaluate`)
against the same runs by hand as asyncio tasks (`benchmarks/experiment_floor.py`). W1 shows
each of thena_nb's configurations ÷ the floor beside each peer ÷ the default path.

    python -m benchmarks --only W1 --code ../other-checkout --no-peers   # another branch's code
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks import workloads
from benchmarks.peers import PEERS

ALL = ("W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "W9", "W10", "W11", "W12", "W13", "W14",
       "W15", "W16")  # fmt: skip
SCRIPTED = ("W3", "W4", "W6", "W7", "W8", "W9", "W10", "W11", "W12", "W13", "W14", "W15", "W16")
"""The workloads that are scripts of their own (`workloads.SCRIPTS`)."""
DEFAULT_JSON = Path(__file__).resolve().parent / "results" / "latest.json"


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        cpu = platform.processor()
    versions = {"thena_nb": _version("thena_nb")}
    for peer in PEERS:
        versions.update(peer.versions())
    return {
        "cpu": cpu,
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "packages": versions,
    }


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "absent"


def _num(value: float, digits: int = 1) -> str:
    return f"{value:,.{digits}f}" if value < 100 else f"{value:,.0f}"


def table(results: dict[str, Any]) -> list[list[str]]:
    """The rows of the printed table: workload, measure, value, target, met."""
    rows: list[list[str]] = []
    w1 = results.get("W1")
    if w1:
        for check in w1.get("checks", []):
            ratio = "÷" in check["target"]
            shown = f"{check['value']:,.2f}×" if ratio else f"{_num(check['value'])} µs"
            limit = f"≥ {check['limit']:.0f}×" if ratio else f"≤ {check['limit']:.0f} µs"
            if ratio and "smolagents" not in check["target"]:
                limit = f"≤ {check['limit']:.1f}×"
            rows.append(["W1", check["target"], shown, limit, _met(check["ok"])])
    w2 = results.get("W2")
    if w2:
        shown = f"{w2['median_ms']:.1f} ms ({w2['best_ms']:.1f}, {w2['worst_ms']:.1f})"
        rows.append(["W2", "median wall (best, worst)", shown, "100 ms ideal", ""])
        rows += _checks("W2", w2)
    w5 = results.get("W5")
    if w5:
        peak = f"{w5['peak_bytes_per_turn']:,.0f} B/turn"
        rows.append(["W5", "peak during the run", peak, "", ""])
        rows += _checks("W5", w5)
    for key in SCRIPTED:
        for part in results.get(key, []):
            status = part["status"]
            shown = {"ran": "see below", "missing": "not run", "failed": "FAILED"}[status]
            rows.append([key, f"{part['title']} ({part['script']})", shown, "", ""])
            met = part.get("json", {}).get("met", {})
            if isinstance(met, dict):
                for name, ok in met.items():
                    rows.append([key, f"{part['title']}: {name} target", "", "", _met(bool(ok))])
    return rows


def w1_matrix(w1: dict[str, Any]) -> list[list[str]]:
    """W1 as a table: one row per configuration, the floor and each peer, one column per N
    (CPU | wall µs; per run at N=1, per turn elsewhere); in brackets a peer's ratio to the
    default path, and each of thena_nb's configurations' ratio to the floor ("× floor")."""
    ns = sorted({r["n"] for r in w1["rows"]})
    header = [
        "W1 tool loop, CPU | wall µs",
        *(f"N={n:,}" + (" (run)" if n == 1 else "") for n in ns),
    ]
    lines: dict[str, list[str]] = {}
    for r in w1["rows"]:
        label = r["config"] if r["framework"] == "thena_nb" else r["framework"]
        cells = lines.setdefault(label, [label] + [""] * len(ns))
        if r["status"] != "measured":
            cell = r["status"]
        else:
            cell = f"{_num(r['median_cpu_us'])} | {_num(r['median_wall_us'])}"
            if "ratio_cpu" in r:
                cell += f" ({r['ratio_cpu']:,.1f}×)"
            if "ratio_floor_cpu" in r:
                cell += f" ({r['ratio_floor_cpu']:,.1f}× floor)"
            if not r["verified"]:
                cell += " UNVERIFIED"
        cells[1 + ns.index(r["n"])] = cell
    return [header, *lines.values()]


def _checks(key: str, result: dict[str, Any]) -> list[list[str]]:
    rows = []
    for check in result.get("checks", []):
        value = check["value"]
        if key == "W2":
            shown = f"{value:+.1%}"
        elif key == "W5":
            shown = f"{value:,.0f} B"
        elif "×" in check["target"] or "within" in check["target"]:
            shown = f"{value:,.2f}×"
        else:
            shown = f"{value:,.1f} µs"
        rows.append([key, check["target"], shown, _limit(key, check), _met(check["ok"])])
    return rows


def _limit(key: str, check: dict[str, Any]) -> str:
    limit = check["limit"]
    if key == "W2":
        return f"≤ +{limit:.0%}"
    if key == "W5":
        return f"< {limit:,.0f} B"
    if "below the fastest" in check["target"]:
        return f"≥ {limit:.0f}×"
    if "within" in check["target"]:
        return f"≤ {limit:.1f}×"
    return f"< {limit:.0f} µs"


def _met(ok: bool) -> str:
    return "yes" if ok else "NO"


def render(rows: list[list[str]], header: list[str] | None = None) -> str:
    """`rows` as an aligned text table with a header."""
    header = header or ["workload", "measure", "value", "target", "met"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for i, row in enumerate([header, *rows]):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="fewer repeats, smaller inputs")
    parser.add_argument(
        "--only", help=f"comma-separated workloads to run (default all: {','.join(ALL)})"
    )
    parser.add_argument(
        "--json", type=Path, default=DEFAULT_JSON, help=f"where to write (default {DEFAULT_JSON})"
    )
    parser.add_argument(
        "--code",
        help="W1: import thena_nb from this checkout in the child processes (another branch)",
    )
    parser.add_argument("--no-peers", action="store_true", help="W1: thena_nb only")
    return parser


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_selected(selected: tuple[str, ...], args: argparse.Namespace) -> dict[str, Any]:
    """The results of each selected workload, by key (the scripted ones a list of parts)."""
    results: dict[str, Any] = {}
    if "W1" in selected:
        results["W1"] = workloads.w1(
            quick=args.quick, log=_log, code=args.code, peers=not args.no_peers
        )
    if "W2" in selected:
        _log("W2 parallel")
        results["W2"] = workloads.w2(quick=args.quick)
    if "W5" in selected:
        _log("W5 memory")
        results["W5"] = workloads.w5(quick=args.quick)
    for script in workloads.SCRIPTS:
        if script.workload in selected:
            _log(f"{script.workload} {script.path}")
            results.setdefault(script.workload, []).append(
                workloads.run_script(script, quick=args.quick)
            )
    return results


def show(report: dict[str, Any]) -> None:
    """Print the report: W1's matrix, the targets table, the notes, each script's output."""
    results = report["results"]
    if "W1" in results:
        matrix = w1_matrix(results["W1"])
        print(render(matrix[1:], matrix[0]) + "\n")
    print(render(table(results)))
    notes = [n for key in ("W1", "W2", "W5") for n in results.get(key, {}).get("notes", [])]
    for key in SCRIPTED:
        notes += [f"{p['script']}: {p['note']}" for p in results.get(key, []) if p.get("note")]
    if notes:
        print("\nNotes:")
        for note in notes:
            print(f"- {note}")
    for key in SCRIPTED:
        for part in results.get(key, []):
            if part["status"] == "ran":
                print(f"\n{key} {part['title']} ({part['script']}):\n{part['stdout'].rstrip()}")
    m = report["machine"]
    print(
        f"\n{m['cpu']}, {m['nproc']} CPUs, Python {m['python']}; "
        f"{report['seconds']:.0f} s{' (quick)' if report['quick'] else ''}"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the selected workloads, print the table and the notes, write the JSON file."""
    parser = _parser()
    args = parser.parse_args(argv)
    selected = ALL
    if args.only:
        selected = tuple(w.strip().upper() for w in args.only.split(",") if w.strip())
        unknown = [w for w in selected if w not in ALL]
        if unknown:
            parser.error(f"unknown workload {unknown[0]!r}; choose from {', '.join(ALL)}")
    started = time.perf_counter()
    results = run_selected(selected, args)
    report = {
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "quick": args.quick,
        "workloads": list(selected),
        "seconds": time.perf_counter() - started,
        "machine": machine(),
        "results": results,
    }
    show(report)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
