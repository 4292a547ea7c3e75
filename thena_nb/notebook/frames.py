"""pandas DataFrames of turns: one row per turn, `TurnInfo` flattened, explicit dtypes.

`turn_frame` backs `Run.frame()`; `stack_frames` backs `thena_nb.frames(runs)`. Columns are
built in one pass over the turns, so a frame of 100,000 turns takes a fraction of a second.
Missing values are missing (`isna()`), never `""`.
"""

from __future__ import annotations

import gc
import html
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

from thena_nb.core.records import _html

if TYPE_CHECKING:
    from thena_nb.core.records.types import Turn

__all__ = [
    "COLUMNS",
    "DIFF_COLUMNS",
    "RUNS_COLUMNS",
    "diff_frame",
    "frame_html",
    "runs_frame",
    "stack_frames",
    "turn_frame",
]

COLUMNS: dict[str, str] = {
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
"""The columns of a turn frame, in order, with their dtypes."""

_DISPLAY = {
    "run_id",
    "turn",
    "step_path",
    "iteration",
    "branch",
    "tool_name",
    "tool_call_source",
    "tool_error",
    "consecutive_fails",
    "response",
    "finish_reason",
    "input_tokens",
    "output_tokens",
    "attempts",
    "duration_s",
}
"""The columns `frame_html` shows; the frame itself keeps them all."""


class _RunLike(Protocol):
    run_id: str

    @property
    def turns(self) -> Sequence[Turn]: ...


def turn_frame(turns: Sequence[Turn]) -> pd.DataFrame:
    """One row per turn, in `Turn.index` order.

    Args:
        turns: The turns of one run (`run.turns`).

    Returns:
        A DataFrame with the columns of `COLUMNS`. `iteration` and `branch` are nullable
        integers, `called_tool` and `tool_error` nullable booleans, `tool_call_source`
        text (`"native"` / `"rescued"`); `model` is the model asked and `response_model`
        the one the API said answered (missing when it said none, as offline models do);
        an empty `response` is missing, and so is the
        `cost_usd` (US dollars) of a turn whose model has no price. Every missing value
        shows as `<NA>`.
    """
    return _build(turns, None)


def stack_frames(runs: Sequence[_RunLike]) -> pd.DataFrame:
    """The turn frames of several runs stacked, with a leading `run_id` column.

    Args:
        runs: Runs (anything with `.run_id` and `.turns`), in the order their rows should come.

    Returns:
        A DataFrame with `run_id` followed by the columns of `turn_frame`.
    """
    turns: list[Turn] = []
    run_ids: list[str] = []
    for run in runs:
        run_turns = _in_order(run.turns)
        turns.extend(run_turns)
        run_ids.extend([run.run_id] * len(run_turns))
    return _build(turns, run_ids)


def frame_html(frame: pd.DataFrame, *, max_rows: int = 40, max_text: int = 80) -> str:
    """A turn frame as an HTML table for a run's notebook display.

    Shows the columns a reader scans (where, which tool, did it fail, the streak, the text,
    tokens); long texts are shortened and only the first and last rows of a long frame are
    shown; every cell is escaped.

    Args:
        frame: A frame from `turn_frame`.
        max_rows: Rows to show before eliding the middle.
        max_text: Characters of each text cell to show.

    Returns:
        An HTML `<table>`.
    """
    if len(frame) > max_rows:
        half = max_rows // 2
        shown = pd.concat([frame.iloc[:half], frame.iloc[-half:]])
    else:
        shown = frame
    shown = shown[[c for c in shown.columns if c in _DISPLAY]].copy()
    for column in ("response", "step_path"):
        if column in shown:
            shown[column] = shown[column].map(lambda v: _cell(v, max_text))
    table = shown.to_html(index=False, escape=True, na_rep="", border=0)
    if len(frame) > max_rows:
        table += f"<p>{html.escape(f'{len(frame)} turns; first and last {half} shown')}</p>"
    return table


def _cell(value: Any, limit: int) -> Any:
    """A text cell shortened to `limit` characters, its control characters shown as text."""
    if pd.isna(value):
        return value
    return _html.without_controls(value if len(value) <= limit else value[: limit - 1] + "…")


@contextmanager
def _gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _in_order(turns: Sequence[Turn]) -> Sequence[Turn]:
    for position, turn in enumerate(turns):
        if turn.index != position:
            return sorted(turns, key=lambda t: t.index)
    return turns


_FIELDS = attrgetter(
    "index",
    "step_path",
    "agent",
    "model",
    "response_model",
    "iteration",
    "branch",
    "info.called_tool",
    "info.tool_name",
    "info.tool_error",
    "info.tool_call_source",
    "info.response",
    "tool_calls",
    "consecutive_fails",
    "finish_reason",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "attempts",
    "started_at",
    "duration_s",
    "cost_usd",
)
_TEXT = {"step_path", "agent", "model", "response_model", "tool_name", "response", "finish_reason"}


def _build(turns: Sequence[Turn], run_ids: list[str] | None) -> pd.DataFrame:
    if run_ids is None:
        turns = _in_order(turns)
    # One pass in C (attrgetter), then a transpose: no per-row pandas work. The pass makes
    # 100,000s of tuples; with the collector on, each generation-2 sweep walks every turn
    # record too, which costs more than the pass itself.
    with _gc_paused():
        rows = list(map(_FIELDS, turns))
        columns = list(zip(*rows, strict=True)) if rows else [() for _ in COLUMNS]
        del rows
        return _frame(columns, run_ids)


def _frame(columns: list[tuple[Any, ...]], run_ids: list[str] | None) -> pd.DataFrame:
    # The dtype comes from `COLUMNS` as text, which pandas-stubs' overloads cannot match.
    array: Any = pd.array
    data: dict[str, Any] = {}
    if run_ids is not None:
        data["run_id"] = array(run_ids, dtype="string")
    for (name, dtype), values in zip(COLUMNS.items(), columns, strict=True):
        if name in _TEXT:
            data[name] = array([v or None for v in values], dtype=dtype)
        elif name == "tool_calls":
            data[name] = np.fromiter(map(len, values), np.int64, len(values))
        elif dtype in ("int64", "float64"):
            data[name] = np.fromiter(values, dtype, len(values))
        elif dtype.startswith("datetime64"):
            data[name] = pd.to_datetime(list(values), utc=True).astype(dtype)
        else:
            data[name] = array(list(values), dtype=dtype)
    return pd.DataFrame(data, copy=False)


RUNS_COLUMNS = (
    "run_id",
    "workflow",
    "input",
    "status",
    "stop_reasons",
    "turns",
    "input_tokens",
    "output_tokens",
    "started_at",
    "parent_run_id",
    "forked_at",
)
"""The columns of `thena_nb.runs()`, in order."""

_LINEAGE = ("parent_run_id", "forked_at")
"""Columns a store of your own may leave out of `list_runs` (they are then missing)."""


def runs_frame(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """`thena_nb.runs()`: a store's run summaries (`RunStore.list_runs`), one row per run."""
    frame = pd.DataFrame(
        [{c: row.get(c) if c in _LINEAGE else row[c] for c in RUNS_COLUMNS} for row in rows],
        columns=RUNS_COLUMNS,
    )
    for column in ("turns", "input_tokens", "output_tokens"):
        frame[column] = frame[column].astype("int64")
    frame["started_at"] = pd.to_datetime(frame["started_at"], utc=True)
    frame["parent_run_id"] = frame["parent_run_id"].astype("string")
    frame["forked_at"] = frame["forked_at"].astype("Int64")
    return frame


DIFF_COLUMNS: dict[str, str] = {
    "turn_a": "Int64",
    "turn_b": "Int64",
    "step_path": "string",
    "agent": "string",
    "iteration": "Int64",
    "differs": "string",
    "cause": "string",
    "reused": "bool",
    "request_differs": "boolean",
    "reply_differs": "boolean",
    "tool_results_differ": "boolean",
    "replayed_a": "boolean",
    "replayed_b": "boolean",
    "response_a": "string",
    "response_b": "string",
    "tool_calls_a": "Int64",
    "tool_calls_b": "Int64",
}
"""The columns of `RunDiff.frame()`, in order, with their dtypes."""


def diff_frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """`RunDiff.frame()`: one row per aligned pair of turns, in the order they ran.

    Args:
        rows: One dict per pair with the keys of `DIFF_COLUMNS` (`None` where a value is
            missing: a turn only one run has, a cause off the divergence's row).

    Returns:
        A DataFrame with the columns of `DIFF_COLUMNS`; turn indexes and counts are nullable
        integers, the flags nullable booleans, and missing values (an empty text too) are
        missing.
    """
    array: Any = pd.array  # the dtype is text, which pandas-stubs' overloads cannot match
    data = {}
    for name, dtype in DIFF_COLUMNS.items():
        values = [row[name] for row in rows]
        if dtype == "string":
            values = [v or None for v in values]
        data[name] = array(values, dtype=dtype)
    return pd.DataFrame(data, copy=False)
