"""`benchmarks.experiment_floor` (W16): experiments against the same runs by hand; run
tiny here, and no timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import experiment_floor, workloads
from benchmarks.__main__ import ALL, SCRIPTED

ROOT = Path(__file__).resolve().parents[2]


def test_it_is_a_workload_of_the_harness() -> None:
    assert "W16" in ALL and "W16" in SCRIPTED
    (script,) = [s for s in workloads.SCRIPTS if s.workload == "W16"]
    assert script.path == "experiment_floor.py" and (ROOT / "benchmarks" / script.path).exists()


def test_the_floor_commits_once_a_loop_pass(tmp_path: Path, monkeypatch: Any) -> None:
    commits: list[int] = []
    commit = experiment_floor.PassCommit.commit

    def counted(self: experiment_floor.PassCommit) -> None:
        commits.append(len(self.waiters))
        commit(self)

    monkeypatch.setattr(experiment_floor.PassCommit, "commit", counted)
    conn = experiment_floor.connect(str(tmp_path / "floor.sqlite3"))
    try:
        inputs = [f"question {i}" for i in range(10)]
        answers = experiment_floor.floor_experiment(conn, inputs, 10, 0.01)
        stored = conn.execute("SELECT count(*), count(DISTINCT run_id) FROM turns").fetchone()
    finally:
        conn.close()
    assert answers == ["done"] * 10
    assert stored == (30, 10)
    assert sum(commits) == 30 and len(commits) < 30  # turns of one pass share a commit


@pytest.mark.parametrize("subject", ["map_store", "pydantic_evals"])
def test_a_child_checks_every_answer_and_reports_its_figures(
    subject: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THENA_NB_STORE", "off")  # measure points it at a file of its own
    row = experiment_floor.measure(subject, 5, 5, 0.001)
    assert (row["subject"], row["cases"], row["concurrency"]) == (subject, 5, 5)
    assert row["wall_s"] > 0 and row["cpu_s"] > 0 and row["kb_per_run"] >= 0


def test_the_script_prints_each_subject_and_its_ratios(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    command = [sys.executable, "benchmarks/experiment_floor.py", "--cases", "5", "--rounds", "1"]
    command += ["--scale-runs", "6", "--scale-concurrency", "3", "--delay", "0.001", "--no-agent"]
    proc = subprocess.run(
        [*command, "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    figures: dict[str, Any] = json.loads(out.read_text())
    assert figures["workload"] == "W16"
    assert [r["subject"] for r in figures["rows"]] == list(experiment_floor.SUBJECTS)
    assert [r["subject"] for r in figures["scale"]] == list(experiment_floor.SCALE_SUBJECTS)
    floor = figures["rows"][-1]
    assert floor["subject"] == "floor" and floor["wall_over_floor"] == 1.0
    for row in figures["rows"]:
        assert row["cpu_over_floor"] == pytest.approx(row["cpu_s"] / floor["cpu_s"])
        assert "wall_over_evals" in row and row["ideal_s"] == pytest.approx(0.003)
    assert figures["scale"][0]["ideal_s"] == pytest.approx(2 * 3 * 0.001)
    assert set(figures["met"]) == {
        "5 cases: map_store wall <= pydantic_evals",
        "5 cases: map_store KB/run <= pydantic_evals",
        "R=6 K=3: map_store wall <= 2x ideal",
    }
    assert "KB/run" in proc.stdout and "target R=6 K=3" in proc.stdout


def test_a_child_refuses_an_unknown_subject() -> None:
    proc = subprocess.run(
        [sys.executable, "benchmarks/experiment_floor.py", "--child", "fastest", "2", "2", "0"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode != 0 and "unknown subject 'fastest'" in proc.stderr
