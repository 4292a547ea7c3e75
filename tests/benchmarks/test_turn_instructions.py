"""`benchmarks.turn_instructions`: instructions per turn, counted under callgrind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import turn_instructions

ROOT = Path(__file__).resolve().parents[2]


def _child(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "benchmarks.turn_instructions", "--child", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("config", ["sync", "stripped", "default"])
def test_a_launch_makes_its_runs_and_checks_their_calls(config: str) -> None:
    proc = _child(config, "4", "2")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "config": config,
        "n": 4,
        "runs": 2,
        "model_calls": 4,
        "tool_calls": 3,
    }


def test_a_launch_refuses_an_unknown_configuration() -> None:
    proc = _child("fastest", "4", "2")
    assert proc.returncode != 0
    assert "usage: --child {default,sync,async,stripped} N RUNS" in proc.stderr


def test_the_table_shows_each_checkout_against_the_first() -> None:
    rows = [
        {"config": "sync", "n": 200, "code": "/a", "per_turn": 200_000.0},
        {"config": "sync", "n": 200, "code": "/b", "per_turn": 190_000.0},
    ]
    lines = turn_instructions.render(rows).splitlines()
    assert lines[1].split() == ["sync", "200", "200,000", "/a"]
    assert lines[2].split() == ["sync", "200", "190,000", "/b", "(-5.0", "%)"]


@pytest.mark.valgrind
def test_counts_grow_with_the_runs_and_give_a_cost_per_turn() -> None:
    row = turn_instructions.per_turn("stripped", 5, ROOT, (1, 3))
    fewer, more = row["instructions"]
    assert more > fewer > 0
    assert row["per_turn"] == (more - fewer) / (2 * 5)
    # A turn runs the executor, the scripted model and a tool: tens of thousands of
    # instructions, never the interpreter's start-up (hundreds of millions) nor nothing.
    assert 10_000 < row["per_turn"] < 2_000_000
