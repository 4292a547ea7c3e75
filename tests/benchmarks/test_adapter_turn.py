"""`benchmarks.adapter_turn`: W1 through the real adapters, against the loop's own server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import adapter_turn

ROOT = Path(__file__).resolve().parents[2]


def _child(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "benchmarks.adapter_turn", "--child", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("adapter", ["openai", "anthropic"])
@pytest.mark.parametrize("store", ["default", "none"])
def test_a_child_makes_its_runs_over_one_connection(adapter: str, store: str) -> None:
    """Every run is checked for its calls; the SDK's connection is the warm-up's, kept."""
    proc = _child(adapter, "4", "2", store, "script")
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)
    assert (row["adapter"], row["n"], row["runs"], row["store"]) == (adapter, 4, 2, store)
    assert len(row["cpu_us_per_turn"]) == 2
    assert all(us > 0 for us in row["cpu_us_per_turn"])
    assert row["connections_per_run"] == 0


@pytest.mark.parametrize("adapter", ["openai", "anthropic"])
def test_a_notebook_cells_run_opens_one_connection(adapter: str) -> None:
    """Called as a cell calls it, each run has a loop of its own: one connection each."""
    proc = _child(adapter, "3", "2", "none", "notebook")
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)
    assert (row["mode"], row["connections_per_run"]) == ("notebook", 1)


def test_an_experiment_shares_one_pool_across_its_runs() -> None:
    """Eight cases through one `wf.map`, twenty at once at most: every run is checked, and
    the runs in flight together open no more connections than there are of them."""
    proc = _child("openai", "3", "8", "default", "experiment")
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)
    assert (row["mode"], row["runs"], len(row["cpu_us_per_turn"])) == ("experiment", 8, 1)
    assert row["connections_per_run"] <= 1


def test_a_child_refuses_an_unknown_adapter() -> None:
    proc = _child("gemini", "4", "2", "default", "script")
    assert proc.returncode != 0
    usage = (
        "usage: --child {openai,anthropic} N RUNS {default,none} "
        "{script,notebook,experiment,counted}"
    )
    assert usage in proc.stderr


def test_the_table_shows_each_checkout_against_the_first() -> None:
    rows: list[dict[str, Any]] = [
        {"median_us": 40_000.0, "wall_s": [0.5, 0.4, 0.6], "connections_per_run": 20.0},
        {"median_us": 4_000.0, "wall_s": [0.05, 0.05, 0.04], "connections_per_run": 0.0},
        {"median_us": 2_000.0, "wall_s": [2.0], "connections_per_run": 0.1},
    ]
    for row, code in zip(rows, ["/before", "/after", "/after"], strict=True):
        row.update(adapter="openai", n=20, runs=3, mode="script", code=code)
    rows[2].update(mode="experiment", runs=200, n=3)
    lines = adapter_turn.render(rows).splitlines()
    assert lines[1].split() == ["openai", "20", "40,000", "2.0", "20.0", "/before"]
    assert lines[2].split() == ["openai", "20", "4,000", "20.0", "0.0", "/after", "(-90", "%)"]
    assert lines[3].split() == ["openai", "3", "2,000", "100.0", "0.1", "/after"]


def test_the_count_table_shows_each_checkout_against_the_first() -> None:
    rows: list[dict[str, Any]] = [
        {"adapter": "openai", "n": 20, "per_turn": 9_000_000.0, "code": "/before"},
        {"adapter": "openai", "n": 20, "per_turn": 7_200_000.0, "code": "/after"},
        {"adapter": "anthropic", "n": 20, "per_turn": 8_000_000.0, "code": "/after"},
    ]
    lines = adapter_turn.render_counts(rows).splitlines()
    assert lines[1].split() == ["openai", "20", "9,000,000", "/before"]
    assert lines[2].split() == ["openai", "20", "7,200,000", "/after", "(-20.0", "%)"]
    assert lines[3].split() == ["anthropic", "20", "8,000,000", "/after"]


@pytest.mark.parametrize(
    "args", [["--instructions", "3", "1"], ["--instructions", "1", "2", "--notebook"]]
)
def test_instructions_are_counted_for_script_runs_from_fewer_to_more(args: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.adapter_turn", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "--instructions needs 0 <= A < B, and counts script runs only" in proc.stderr


@pytest.mark.valgrind
def test_a_count_grows_with_the_runs_and_gives_a_cost_per_turn() -> None:
    row = adapter_turn.count("openai", 2, (0, 1), "none", ROOT)
    fewer, more = row["instructions"]
    assert more > fewer > 0
    assert row["per_turn"] == (more - fewer) / 2
    # A turn through the SDK builds an HTTP request and reads its answer: millions of
    # instructions, never the start-up's (billions) nor nothing.
    assert 200_000 < row["per_turn"] < 100_000_000
