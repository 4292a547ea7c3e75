"""Turn frames: columns, dtypes, row order, missing values, stacking, speed."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
import pytest
from nb_records import HOSTILE, START, build_turn, streak_turns

from thena_nb.core.records.types import Turn
from thena_nb.notebook.frames import COLUMNS, frame_html, stack_frames, turn_frame

EXPECTED_DTYPES = {
    "turn": "int64",
    "step_path": "string",
    "agent": "string",
    "model": "string",
    "response_model": "string",
    "iteration": "Int64",
    "branch": "Int64",
    "called_tool": "boolean",
    "tool_name": "string",
    "tool_error": "boolean",
    "tool_call_source": "string",
    "response": "string",
    "tool_calls": "int64",
    "consecutive_fails": "int64",
    "finish_reason": "string",
    "input_tokens": "int64",
    "output_tokens": "int64",
    "cache_read_tokens": "int64",
    "cache_write_tokens": "int64",
    "attempts": "int64",
    "started_at": "datetime64[ns, UTC]",
    "duration_s": "float64",
    "cost_usd": "Float64",
}


@dataclass
class FakeRun:
    run_id: str
    turns: list[Turn] = field(default_factory=list)


def sample_turns() -> list[Turn]:
    return [
        build_turn(0, response="plan", path="wf/0.Planner", agent="Planner"),
        build_turn(1, source="native", failed=True, streak=1, iteration=1, calls=2),
        build_turn(2, source="rescued", failed=False, iteration=2, response="<tool>x</tool>"),
        build_turn(3, iteration=3, branch=1, finish_reason=None, input_tokens=7, attempts=3),
    ]


def test_columns_and_dtypes_are_fixed() -> None:
    frame = turn_frame(sample_turns())
    assert list(frame.columns) == list(EXPECTED_DTYPES)
    assert {c: str(t) for c, t in frame.dtypes.items()} == EXPECTED_DTYPES
    assert dict(COLUMNS) == EXPECTED_DTYPES
    assert set(frame["tool_call_source"].dropna()) <= {"native", "rescued"}


def test_every_missing_value_shows_as_na() -> None:
    frame = turn_frame(sample_turns())
    shown = frame.to_string()
    assert "NaN" not in shown and "None" not in shown
    no_tool = frame[~frame["called_tool"]].iloc[0]
    assert no_tool["tool_call_source"] is pd.NA and no_tool["tool_name"] is pd.NA


def test_an_empty_run_has_the_same_columns_and_dtypes() -> None:
    frame = turn_frame([])
    assert len(frame) == 0
    assert {c: str(t) for c, t in frame.dtypes.items()} == EXPECTED_DTYPES


def test_values_come_from_the_turns_and_their_info() -> None:
    frame = turn_frame(sample_turns())
    row = frame.iloc[1]
    assert row["turn"] == 1
    assert row["step_path"] == "wf/0.loop/0.Executor"
    assert bool(row["called_tool"]) is True
    assert row["tool_name"] == "search"
    assert bool(row["tool_error"]) is True
    assert row["tool_call_source"] == "native"
    assert row["tool_calls"] == 2
    assert row["consecutive_fails"] == 1
    assert frame["iteration"].tolist()[1:] == [1, 2, 3]
    assert frame.loc[3, "input_tokens"] == 7
    assert frame.loc[3, "attempts"] == 3
    assert frame.loc[2, "tool_call_source"] == "rescued"
    assert frame.loc[2, "response"] == "<tool>x</tool>"
    assert frame["started_at"].iloc[0] == pd.Timestamp(START)
    assert frame["duration_s"].tolist() == [0.0, 0.25, 0.5, 0.75]


def test_missing_values_are_missing_never_empty_strings() -> None:
    frame = turn_frame(sample_turns())
    missing = frame.isna()
    for column in ("iteration", "branch", "tool_name", "tool_error", "tool_call_source"):
        assert missing.loc[0, column], column
    assert not frame["called_tool"].iloc[0]
    # Turn 1 said nothing; turn 3 has no finish reason.
    assert missing.loc[1, "response"]
    assert missing.loc[3, "finish_reason"]
    assert frame.loc[3, "branch"] == 1
    for column, dtype in EXPECTED_DTYPES.items():
        if dtype == "string":
            assert not (frame[column] == "").any(), column


def test_rows_follow_turn_index_order() -> None:
    turns = sample_turns()
    frame = turn_frame([turns[2], turns[0], turns[3], turns[1]])
    assert frame["turn"].tolist() == [0, 1, 2, 3]
    assert list(frame.index) == [0, 1, 2, 3]


def test_stack_frames_adds_a_leading_run_id_column() -> None:
    first = FakeRun("run-a", sample_turns())
    second = FakeRun("run-b", streak_turns("nN"))
    frame = stack_frames([first, second])
    assert list(frame.columns) == ["run_id", *EXPECTED_DTYPES]
    assert str(frame["run_id"].dtype) == "string"
    assert frame["run_id"].tolist() == ["run-a"] * 4 + ["run-b"] * 2
    assert frame["turn"].tolist() == [0, 1, 2, 3, 0, 1]
    assert str(frame["tool_call_source"].dtype) == "string"
    assert str(frame["iteration"].dtype) == "Int64"
    assert list(frame.index) == list(range(6))


def test_stack_frames_of_nothing_is_empty_with_the_columns() -> None:
    frame = stack_frames([])
    assert list(frame.columns) == ["run_id", *EXPECTED_DTYPES]
    assert len(frame) == 0


def test_frame_html_escapes_model_text_and_shortens_long_frames() -> None:
    turns = [build_turn(i, response=HOSTILE) for i in range(100)]
    text = frame_html(turn_frame(turns), max_rows=10)
    assert "<script>" not in text
    assert "<img" not in text
    assert "&lt;script&gt;" in text
    assert "100 turns; first and last 5 shown" in text
    assert text.count("</tr>") == 11  # header row + 10 turns


@pytest.mark.parametrize("n", [100_000])
def test_a_hundred_thousand_turns_make_one_row_each(n: int) -> None:
    """How fast is measured by benchmark W3 (`python -m benchmarks --only W3`), not here."""
    turns = streak_turns("nNrR." * (n // 5))
    frame = turn_frame(turns)
    assert len(frame) == n and frame["turn"].tolist() == list(range(n))
