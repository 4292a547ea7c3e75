"""`benchmarks.store_turn_parts`: the pieces of a stored turn, each counted alone; run tiny
here, and no count is asserted but that it is one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import store_turn_parts

ROOT = Path(__file__).resolve().parents[2]
WRITING = ("insert", "write", "recorded")


@pytest.mark.parametrize("part", store_turn_parts.PARTS)
def test_each_piece_runs_as_many_times_as_asked_and_the_writing_ones_store_a_row_each(
    part: str,
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.store_turn_parts", "--child", part, "4", "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    assert row["part"] == part and row["calls"] == 12
    # The warm-up calls and the counted ones, each a row of its own, none written twice.
    assert row["rows"] == (store_turn_parts.WARMUPS + 12 if part in WRITING else 0)


def test_an_unknown_piece_is_refused_with_the_usage() -> None:
    with pytest.raises(SystemExit, match="usage: --child"):
        store_turn_parts.main(["--child", "everything", "1", "1"])


@pytest.mark.valgrind
def test_a_piece_is_counted_per_call() -> None:
    assert store_turn_parts.count("turn_json", 20) > 1_000
