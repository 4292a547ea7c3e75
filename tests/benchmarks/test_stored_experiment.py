"""`benchmarks.stored_experiment` (W14): a stored experiment run again, all reused, against
the floor of reading its runs' rows; run small here, and no timing is asserted."""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import stored_experiment, workloads
from benchmarks.__main__ import ALL, SCRIPTED

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    """A run of 20 runs over 2 rounds: its printed table and its JSON figures."""
    out = tmp_path_factory.mktemp("w14") / "figures.json"
    command = [sys.executable, "benchmarks/stored_experiment.py", "--runs", "20", "--rounds", "2"]
    proc = subprocess.run(
        [*command, "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    figures: dict[str, Any] = json.loads(out.read_text())
    return proc.stdout, figures


def test_it_is_a_workload_of_the_harness() -> None:
    assert "W14" in ALL and "W14" in SCRIPTED
    (script,) = [s for s in workloads.SCRIPTS if s.workload == "W14"]
    assert script.path == "stored_experiment.py" and (ROOT / "benchmarks" / script.path).exists()


def test_the_figures_are_the_floor_and_the_rerun_and_their_ratio(
    small: tuple[str, dict[str, Any]],
) -> None:
    stdout, figures = small
    assert figures["workload"] == "W14" and figures["target_ratio"] == 5.0
    assert set(figures["met"]) == {"rerun_within_5x_floor"}
    (row,) = figures["rows"]
    assert (row["runs"], row["turns_per_run"], row["rounds"]) == (20, 3, 2)
    for key in ("floor_cpu_s", "rerun_cpu_s", "floor_wall_s", "rerun_wall_s", "live_cpu_s"):
        assert math.isfinite(row[key]) and row[key] > 0, (key, row[key])
    assert row["ratio_cpu"] == pytest.approx(row["rerun_cpu_s"] / row["floor_cpu_s"])
    assert "a stored experiment of 20 runs (3 turns each) run again, all reused" in stdout
    assert "target: re-run CPU within 5x the floor:" in stdout


def test_the_floor_decodes_every_row_of_the_runs(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("THENA_NB_STORE", str(tmp_path / "runs.sqlite3"))
    inputs = stored_experiment.cases(6)
    exp = stored_experiment.run_once(inputs)
    assert len(exp.run_ids) == 6 and exp.reused == 0
    conn = sqlite3.connect(tmp_path / "runs.sqlite3", isolation_level=None)
    try:
        headers, turns, parts = stored_experiment.floor(conn, list(exp.run_ids))
        # Each run: its header (7 JSON columns), 3 turns, and its request parts.
        assert len(headers) == 6 and all(len(h) == 7 for h in headers)
        history, report = headers[0][-2:]
        assert len(history) == 6 and report["kind"] == "workflow"  # decoded
        assert len(turns) == 18 and [t["index"] for t, _ in turns] == [0, 1, 2] * 6
        assert len(parts) >= 6
    finally:
        conn.close()
    again, frame = stored_experiment.rerun(inputs, 6)
    assert again.reused == 6 and frame["reused"].all()


def test_it_refuses_bad_sizes() -> None:
    proc = subprocess.run(
        [sys.executable, "benchmarks/stored_experiment.py", "--runs", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and "--runs must be at least 2" in proc.stderr
