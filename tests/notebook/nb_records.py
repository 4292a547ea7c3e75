"""Hand-made turns and loop nodes for the notebook-layer tests (no run needed)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from thena_nb.core.records.report import ReportNode
from thena_nb.core.records.types import ToolCall, Turn, TurnInfo

START = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
HOSTILE = "<script>alert(1)</script> and <img src=x onerror=alert(1)>"

TurnFactory = Callable[..., Turn]


def build_turn(
    index: int,
    *,
    source: str | None = None,
    failed: bool | None = None,
    streak: int = 0,
    response: str = "",
    iteration: int | None = None,
    branch: int | None = None,
    path: str = "wf/0.loop/0.Executor",
    agent: str = "Executor",
    finish_reason: str | None = "end_turn",
    calls: int = 1,
    **extra: Any,
) -> Turn:
    """A turn; with `source`, it made `calls` tool calls that all worked or all failed."""
    tool_calls = []
    if source is not None:
        for n in range(calls):
            ok = not failed
            tool_calls.append(
                ToolCall(
                    id=f"call-{index}-{n}",
                    name="search",
                    arguments={"q": f"query {n}"},
                    source=source,  # type: ignore[arg-type]
                    ok=ok,
                    result="found it" if ok else None,
                    error=None if ok else "tool 'search' failed: ValueError: nothing",
                )
            )
    info = TurnInfo(
        called_tool=source is not None,
        tool_name="search" if source is not None else None,
        tool_error=bool(failed) if source is not None else None,
        tool_call_source=source,  # type: ignore[arg-type]
        response=response,
    )
    return Turn(
        index=index,
        step_path=path,
        agent=agent,
        iteration=iteration,
        branch=branch,
        info=info,
        tool_calls=tool_calls,
        finish_reason=finish_reason,
        consecutive_fails=streak,
        started_at=START + timedelta(seconds=index),
        duration_s=0.25 * index,
        **extra,
    )


def build_loop(
    path: str,
    turn_indexes: list[int],
    *,
    stop_reason: str | None = "until",
    max_fails: float = 5,
    iterations: int | None = None,
    max_iterations: int = 10,
    error: str | None = None,
) -> ReportNode:
    """A loop node whose one agent child ran the given turns."""
    child = ReportNode(kind="agent", name="Executor", path=f"{path}/0.Executor", turns=turn_indexes)
    return ReportNode(
        kind="loop",
        name="loop",
        path=path,
        children=[child],
        stop_reason=stop_reason,  # type: ignore[arg-type]
        iterations=len(turn_indexes) if iterations is None else iterations,
        max_iterations=max_iterations,
        max_fails=max_fails,
        error=error,
    )


def streak_turns(pattern: str, *, start: int = 0) -> list[Turn]:
    """Turns from a pattern: `n`/`N` native ok/failed, `r`/`R` rescued ok/failed, `.` text."""
    turns = []
    streak = 0
    for offset, ch in enumerate(pattern):
        index = start + offset
        if ch == ".":
            turns.append(build_turn(index, streak=streak, response="thinking"))
            continue
        failed = ch.isupper()
        streak = streak + 1 if failed else 0
        source = "native" if ch.lower() == "n" else "rescued"
        turns.append(build_turn(index, source=source, failed=failed, streak=streak))
    return turns
