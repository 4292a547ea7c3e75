"""`benchmarks.foreign_step` (W11): a pydantic-ai agent plainly and as a step; no timing is
asserted here."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import foreign_step

ROOT = Path(__file__).resolve().parents[2]
QUICK_CALLS = [5, 20]


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    """The quick run's printed table and its JSON figures."""
    out = tmp_path_factory.mktemp("w11") / "figures.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.foreign_step", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    figures: dict[str, Any] = json.loads(out.read_text())
    return proc.stdout, figures


def test_both_ways_make_the_same_calls_at_each_n(quick: tuple[str, dict[str, Any]]) -> None:
    _, figures = quick
    assert figures["workload"] == "W11"
    assert [r["n"] for r in figures["rows"]] == QUICK_CALLS
    for row in figures["rows"]:
        n = row["n"]
        assert row["calls"] == {"plain": [[n, n - 1]], "step": [[n, n - 1]]}
        assert row["rounds"] == foreign_step.QUICK_ROUNDS
        for key in ("plain_cpu_us_per_call", "step_cpu_us_per_call", "ratio_cpu", "ratio_wall"):
            assert math.isfinite(row[key]) and row[key] > 0, (key, row[key])
        assert row["ratio_cpu"] == pytest.approx(
            row["step_cpu_us_per_call"] / row["plain_cpu_us_per_call"]
        )
    assert figures["goal_ratio_cpu"] == 1.3
    assert set(figures["met"]) == {"step_adds_at_most_30_percent"}  # judged at N=20


def test_the_table_has_a_row_per_n_and_the_ratios(quick: tuple[str, dict[str, Any]]) -> None:
    stdout, _ = quick
    lines = stdout.splitlines()
    header = [cell.strip() for cell in lines[0].split("  ") if cell.strip()]
    assert header == foreign_step.HEADER
    assert set(lines[1]) <= {"-", " "}
    rows = [line.split() for line in lines[2 : 2 + len(QUICK_CALLS)]]
    for cells, n in zip(rows, QUICK_CALLS, strict=True):
        # N, plain CPU | wall, step CPU | wall, the two ratios, model calls plain | step,
        # tool calls plain | step
        assert len(cells) == 15 and cells[0] == str(n) and cells[2] == cells[5] == "|"
        ratios = [float(c) for c in cells[7:9]]
        assert all(math.isfinite(r) and r > 0 for r in ratios)
        assert cells[9:] == [str(n), "|", str(n), str(n - 1), "|", str(n - 1)]
    assert "goal at N = 20 and 200: step ÷ plain ≤ 1.3 (CPU):" in lines[2 + len(QUICK_CALLS)]


@pytest.mark.parametrize("way", ["plain", "step"])
def test_each_way_checks_its_calls_and_gives_its_times(way: str, tmp_path: Path) -> None:
    """Past pydantic-ai's default limit of 50 requests a run, both ways."""
    from thena_nb.store import SqliteRunStore

    store = SqliteRunStore(tmp_path / "runs.sqlite3")
    try:
        wall, cpu, model_calls, tool_calls = asyncio.run(foreign_step.runners(60, store)[way]())
    finally:
        store.close()
    assert (model_calls, tool_calls) == (60, 59)
    assert wall > 0 and cpu >= 0
