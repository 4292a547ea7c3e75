"""`python -m benchmarks` runs and writes its figures; no timing is asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PEERS = ["pydantic-ai", "LangGraph", "smolagents"]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("bench") / "figures.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--only", "W1,W2,W5", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "workload" in proc.stdout and f"figures written to {out}" in proc.stdout
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def test_writes_only_the_selected_workloads(report: dict[str, Any]) -> None:
    assert report["quick"] is True
    assert report["workloads"] == ["W1", "W2", "W5"]
    assert sorted(report["results"]) == ["W1", "W2", "W5"]
    assert {"cpu", "nproc", "python", "packages"} <= set(report["machine"])
    assert report["machine"]["packages"]["thena_nb"] != "absent"


def test_w1_verifies_call_counts_of_thena_nb(report: dict[str, Any]) -> None:
    w1 = report["results"]["W1"]
    ours = {r["n"]: r for r in w1["rows"] if r["framework"] == "thena_nb"}
    assert sorted(ours) == [20, 200, 2000]
    for n, row in ours.items():
        assert row["status"] == "measured"
        assert (row["model_calls"], row["tool_calls"]) == (n, n - 1)
        assert row["verified"] is True
        assert row["samples"] >= 1
        assert row["median_cpu_us_per_turn"] > 0 and row["median_wall_us_per_turn"] > 0
    assert {"flatness_wall", "flatness_cpu", "checks", "notes"} <= set(w1)
    assert all({"target", "value", "limit", "ok"} <= set(c) for c in w1["checks"])


@pytest.mark.parametrize("peer", PEERS)
def test_w1_peer_is_verified_or_skipped_with_a_note(report: dict[str, Any], peer: str) -> None:
    w1 = report["results"]["W1"]
    assert peer in w1["frameworks"]
    rows = [r for r in w1["rows"] if r["framework"] == peer]
    absent = [n for n in w1["notes"] if n.startswith(f"{peer} skipped: not installed")]
    if absent:
        assert rows == [], "a peer that is not installed has no rows"
        assert "pip install" in absent[0]
        return
    at_20 = next(r for r in rows if r["n"] == 20)
    assert at_20["status"] == "measured", at_20["note"]
    assert (at_20["model_calls"], at_20["tool_calls"]) == (20, 19)
    assert at_20["verified"] is True
    assert at_20["ratio_cpu"] > 0 and at_20["ratio_wall"] > 0
    # A quick run measures the peers at N=20 only, and says so.
    assert {r["status"] for r in rows if r["n"] != 20} == {"skipped"}
    assert any("quick run" in note for note in w1["notes"])


def test_w2_and_w5_figures(report: dict[str, Any]) -> None:
    w2 = report["results"]["W2"]
    assert w2["ideal_ms"] == 100.0
    assert w2["median_ms"] >= w2["best_ms"] > 0
    assert w2["checks"][0]["limit"] == 0.10
    w5 = report["results"]["W5"]
    assert w5["turns"] == 10_000
    assert w5["bytes_per_turn"] > 0 and w5["peak_bytes_per_turn"] >= w5["bytes_per_turn"]
    assert w5["checks"][0]["limit"] == 4096.0
    # With what each model was sent kept on its turn, at 2,000 turns, in memory and in SQLite.
    assert w5["store_turns"] == 2_000 and w5["bytes_per_turn_at_store_turns"] > 0
    assert w5["store_bytes_per_turn"] > w5["store_bytes_per_turn_beyond_text"] > 0
    assert [c["limit"] for c in w5["checks"]] == [4096.0] * 3


def test_rejects_an_unknown_workload() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--only", "W9"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "unknown workload 'W9'" in proc.stderr
