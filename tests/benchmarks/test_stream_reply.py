"""`benchmarks.stream_reply`: a long answer through each real adapter, streamed and not,
against the benchmark's own server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import stream_reply

ROOT = Path(__file__).resolve().parents[2]


def _child(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "benchmarks.stream_reply", "--child", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("adapter", ["openai", "anthropic"])
def test_a_child_checks_every_answer_and_counts_the_pieces(adapter: str) -> None:
    """Forty words and "done" (204 characters) arrive in 51 pieces of four characters,
    each call's text checked against the whole answer, streamed and not."""
    proc = _child(adapter, "40", "2")
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)
    assert (row["adapter"], row["words"], row["calls"], row["text_chunks"]) == (adapter, 40, 2, 51)
    assert row["streamed_us"] > 0 and row["plain_us"] > 0
    assert row["streamed_us_per_chunk"] == pytest.approx(row["streamed_us"] / 51)


@pytest.mark.parametrize(
    "args",
    [["openai", "40"], ["openai", "40", "0"], ["openai", "forty", "2"], ["gemini", "4", "2"]],
)
def test_a_child_refuses_bad_arguments(args: list[str]) -> None:
    proc = _child(*args)
    assert proc.returncode != 0
    assert "usage: --child {openai,anthropic} WORDS CALLS (CALLS at least 1)" in proc.stderr


def test_the_table_shows_each_checkout_against_the_first() -> None:
    rows: list[dict[str, Any]] = [
        {"streamed_us": 70_000.0, "plain_us": 2_500.0, "code": "/before"},
        {"streamed_us": 21_000.0, "plain_us": 2_000.0, "code": "/after"},
    ]
    for row in rows:
        row.update(adapter="openai", words=250, text_chunks=313)
        row["streamed_us_per_chunk"] = row["streamed_us"] / 313
    lines = stream_reply.render(rows).splitlines()
    assert lines[1].split() == ["openai", "250", "313", "70,000", "224", "2,500", "/before"]
    assert lines[2].split()[:7] == ["openai", "250", "313", "21,000", "67", "2,000", "/after"]
    assert lines[2].endswith("(streamed -70 %, plain -20 %)")
