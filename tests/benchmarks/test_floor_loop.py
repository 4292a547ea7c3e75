"""`benchmarks.floor_loop` (W15): the default path against W1's loop by hand; run tiny
here, and no timing is asserted."""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import floor_loop, workloads
from benchmarks.__main__ import ALL, SCRIPTED

ROOT = Path(__file__).resolve().parents[2]


def test_it_is_a_workload_of_the_harness() -> None:
    assert "W15" in ALL and "W15" in SCRIPTED
    (script,) = [s for s in workloads.SCRIPTS if s.workload == "W15"]
    assert script.path == "floor_loop.py" and (ROOT / "benchmarks" / script.path).exists()


def test_the_floor_commits_one_row_a_turn_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "floor.sqlite3"
    conn = floor_loop.connect(path)
    try:
        messages = floor_loop.floor_run(conn, 4)
        assert [m["role"] for m in messages] == ["user", "assistant", "tool"] * 1 + [
            "assistant", "tool", "assistant", "tool", "assistant"
        ]  # fmt: skip
        assert messages[-1]["content"] == "done" and messages[2]["content"] == "1"  # add(0, 1)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    finally:
        conn.close()
    other = sqlite3.connect(path)  # committed: another connection sees every turn
    try:
        rows = other.execute("SELECT turn, body FROM turns ORDER BY turn").fetchall()
    finally:
        other.close()
    assert [t for t, _ in rows] == [0, 1, 2, 3]
    assert json.loads(rows[0][1])["reply"]["tool_calls"][0]["arguments"] == {"a": 0, "b": 1}


def test_measure_alternates_both_and_gives_their_ratio(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THENA_NB_STORE", "off")  # measure points it at a file of its own
    row = floor_loop.measure(3, 2)
    assert (row["n"], row["rounds"]) == (3, 2)
    for key in ("floor_cpu_us", "default_cpu_us", "floor_wall_us", "default_wall_us"):
        assert math.isfinite(row[key]) and row[key] > 0, key
    assert row["ratio_cpu"] == pytest.approx(row["default_cpu_us"] / row["floor_cpu_us"])


@pytest.mark.parametrize("subject", ["floor", "default"])
def test_a_launch_makes_its_runs(subject: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.floor_loop", "--child", subject, "3", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "subject": subject, "n": 3, "runs": 2, "model_calls": 3, "tool_calls": 2
    }  # fmt: skip


def test_the_script_prints_the_table_and_writes_the_figures(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    command = [sys.executable, "benchmarks/floor_loop.py", "--n", "3", "--rounds", "2"]
    proc = subprocess.run(
        [*command, "--no-instructions", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    figures: dict[str, Any] = json.loads(out.read_text())
    assert figures["workload"] == "W15" and figures["instructions"] == []
    assert [r["n"] for r in figures["rows"]] == [3]
    assert figures["met"] == {}  # no target at N=3
    assert "W1 by hand (floor) against the default path" in proc.stdout
    assert "instructions not counted" in proc.stdout


@pytest.mark.valgrind
def test_both_are_counted_the_same_way() -> None:
    row = floor_loop.counted(3, (1, 2))
    for subject in ("floor", "default"):
        fewer, more = row[subject]["instructions"]
        assert more > fewer > 0
        assert row[subject]["per_turn"] == (more - fewer) / 3
    assert row["ratio"] == row["default"]["per_turn"] / row["floor"]["per_turn"]
