"""`python -m benchmarks` runs and writes its figures; no timing is asserted here."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PEERS = ["pydantic-ai", "LangGraph", "smolagents", "OpenAI Agents SDK"]
CONFIGS = ["default", "sync", "async", "stripped"]


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


def test_w1_measures_every_configuration_default_path_first(report: dict[str, Any]) -> None:
    w1 = report["results"]["W1"]
    ours = [r for r in w1["rows"] if r["framework"] == "thena_nb"]
    assert list(dict.fromkeys(r["config"] for r in ours)) == CONFIGS
    assert list(w1["configs"]) == CONFIGS
    for config in CONFIGS:
        sizes = [r["n"] for r in ours if r["config"] == config]
        assert sizes == ([1, 20, 200, 1000] if config == "stripped" else [1, 20, 200])
    for row in ours:
        n = row["n"]
        assert row["status"] == "measured"
        assert (row["model_calls"], row["tool_calls"]) == (n, n - 1)
        assert row["verified"] is True
        assert row["samples"] >= 1 and row["processes"] == 1
        assert row["median_cpu_us"] > 0 and row["median_wall_us"] > 0
        assert row["unit"] == ("µs per run" if n == 1 else "µs per turn")
        assert Path(row["code"]) == ROOT  # thena_nb from this checkout


def test_w1_checks_are_the_targets(report: dict[str, Any]) -> None:
    checks = {c["target"]: c for c in report["results"]["W1"]["checks"]}
    limits = {t.split(":")[0]: c["limit"] for t, c in checks.items()}
    assert limits["default path, N=200"] == 75.0
    assert limits["default path, N=20"] == 120.0
    assert limits["default path, one-turn run"] == 400.0
    assert limits["stripped, N=200"] == 20.0
    assert limits["stripped, N=1,000 ÷ N=200 (CPU µs per turn)"] == 1.3
    for check in checks.values():
        assert check["ok"] is (
            check["value"] >= check["limit"]
            if "smolagents" in check["target"]
            else check["value"] <= check["limit"]
        )


def test_w1_child_checks_the_default_store(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.w1_child", "default", "3", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["config"], out["n"], out["model_calls"], out["tool_calls"]) == ("default", 3, 3, 2)
    assert out["stored_turns"] == 3 and len(out["cpu_s"]) == len(out["wall_s"]) == 1
    assert out["between_runs"] == "gc.collect"


@pytest.mark.parametrize(("flags", "collected"), [([], True), (["--back-to-back"], False)])
def test_w1_child_collects_before_each_run_unless_back_to_back(
    flags: list[str],
    collected: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from benchmarks import w1_child

    monkeypatch.setattr(w1_child, "_collect_between", True)
    monkeypatch.setenv("THENA_NB_STORE", "off")  # the child points it at a file of its own
    full: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(1)

    gc.callbacks.append(count)
    try:
        assert w1_child.main(["stripped", "2", "5", *flags]) == 0
    finally:
        gc.callbacks.remove(count)
    out = json.loads(capsys.readouterr().out)
    assert out["between_runs"] == ("gc.collect" if collected else "nothing")
    assert len(out["cpu_s"]) == 5 and out["model_calls"] == 2
    # five explicit full collections, one before each timed run; none asked for otherwise
    assert (len(full) >= 5) is collected


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["fastest", "3", "1"], "unknown configuration 'fastest'; choose from default, sync"),
        (
            ["stripped", "3", "1", "--warm"],
            "usage: python -m benchmarks.w1_child CONFIG N REPEATS [--back-to-back]",
        ),
    ],
)
def test_w1_child_rejects_bad_arguments(args: list[str], error: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.w1_child", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert error in proc.stderr


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
    # A quick run measures the peers at N=20 only, and says so.
    assert [r["n"] for r in rows] == [20]
    at_20 = rows[0]
    assert at_20["status"] == "measured", at_20["note"]
    assert (at_20["model_calls"], at_20["tool_calls"]) == (20, 19)
    assert at_20["verified"] is True
    assert at_20["ratio_cpu"] > 0 and at_20["ratio_wall"] > 0
    assert any("quick run" in note for note in w1["notes"])


def test_w1_table_has_a_row_per_configuration_and_peer(report: dict[str, Any]) -> None:
    from benchmarks.__main__ import w1_matrix

    header, *rows = w1_matrix(report["results"]["W1"])
    assert header[1:] == ["N=1 (run)", "N=20", "N=200", "N=1,000"]
    labels = [r[0] for r in rows]
    assert labels[:4] == CONFIGS
    assert all(r[1] and r[2] and r[3] for r in rows[:4])
    assert rows[3][4] and not rows[0][4]  # only the stripped loop runs at N=1,000


def test_w1_shows_ours_against_the_floor_and_peers_against_ours(report: dict[str, Any]) -> None:
    from benchmarks.__main__ import w1_matrix

    w1 = report["results"]["W1"]
    floor = {r["n"]: r for r in w1["rows"] if r["framework"] == "floor"}
    assert sorted(floor) == [1, 20, 200] and all(r["verified"] for r in floor.values())
    for row in w1["rows"]:
        if row["framework"] == "thena_nb" and row["n"] in floor:
            want = row["median_cpu_us"] / floor[row["n"]]["median_cpu_us"]
            assert row["ratio_floor_cpu"] == pytest.approx(want)
    checks = {c["target"]: c for c in w1["checks"]}
    assert checks["default path ÷ floor, N=200: ratio (CPU)"]["limit"] == 1.5
    assert checks["default path ÷ floor, N=20: ratio (CPU)"]["limit"] == 2.0
    _, *rows = w1_matrix(w1)
    assert rows[4][0] == "floor" and "× floor" in rows[0][2] and "floor" not in rows[4][2]


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
        [sys.executable, "-m", "benchmarks", "--only", "W99"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "unknown workload 'W99'" in proc.stderr
