"""An experiment's row of one run (a row of `exp.frame()`), made from the run, or from what
the store read of it without rebuilding it (`SqliteRunStore.summaries`): a run taken from
the store again needs only its row, so it is not loaded until it is asked for."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from thena_nb.core.records.types import Usage
from thena_nb.core.runs.run import Run

__all__ = ["RunFacts", "facts_from_summary", "facts_of", "row_of"]


@dataclasses.dataclass(frozen=True, slots=True)
class RunFacts:
    """What a run's row is made of."""

    run_id: str
    status: str
    error: str | None
    stop_reasons: tuple[str | None, ...]
    """Each loop node's stop reason, in pre-order (`run.loops`)."""
    turns: int
    tool_calls: int
    rescued_calls: int
    failed_calls: int
    """Tool calls that failed (`ok is False`)."""
    usage: Usage
    started_at: datetime
    finished_at: datetime | None


def facts_of(run: Run) -> RunFacts:
    """A run's facts."""
    calls = [c for t in run.turns for c in t.tool_calls]
    return RunFacts(
        run.run_id,
        run.status,
        run.error,
        tuple(n.stop_reason for n in run.loops),
        len(run.turns),
        len(calls),
        sum(c.source == "rescued" for c in calls),
        sum(c.ok is False for c in calls),
        run.usage,
        run.started_at,
        run.finished_at,
    )


def facts_from_summary(summary: dict[str, Any]) -> RunFacts:
    """A stored run's facts from its summary (`SqliteRunStore.summaries`).

    Raises:
        ValueError, TypeError, KeyError, AttributeError: The summary is not one.
    """
    finished = summary["finished_at"]
    return RunFacts(
        summary["run_id"],
        summary["status"],
        summary["error"],
        tuple(_stop_reasons(summary["report"])),
        int(summary["turns"]),
        int(summary["tool_calls"]),
        int(summary["rescued_calls"]),
        int(summary["failed_calls"]),
        Usage.model_validate(summary["usage"]),
        datetime.fromisoformat(summary["started_at"]),
        datetime.fromisoformat(finished) if finished else None,
    )


def _stop_reasons(report: dict[str, Any]) -> list[str | None]:
    """Each loop node's stop reason in a stored report tree, in pre-order (as `run.loops`)."""
    out, todo = [], [report]
    while todo:
        node = todo.pop()
        if node["kind"] == "loop":
            reason = node.get("stop_reason")
            if reason is not None and not isinstance(reason, str):
                raise TypeError(f"a stop reason is text, not {reason!r}")
            out.append(reason)
        children = node.get("children")
        if children:
            todo.extend(reversed(children))
    return out


def row_of(
    input: str, variant: str, facts: RunFacts, reused: bool = False, changed: str = ""
) -> dict[str, Any]:
    """A run's row of `exp.frame()` (before its case, repeat and score columns)."""
    usage = facts.usage
    cost, saved = usage.cost_usd, usage.saved_usd
    if reused:  # taken from the store: this experiment made none of its calls
        cost, saved = 0.0, saved + (cost or 0.0)
    open_loop = "waiting" if facts.status == "waiting" else "error"  # no stop reason yet
    finished = facts.finished_at
    calls = facts.tool_calls
    return {
        "input": input,
        "variant": variant,
        "status": facts.status,
        "error": facts.error if facts.status == "failed" else None,
        "stop_reasons": ",".join(r or open_loop for r in facts.stop_reasons)
        if facts.stop_reasons
        else None,
        "turns": facts.turns,
        "tool_calls": calls,
        "rescued": facts.rescued_calls / calls if calls else None,
        # A model (or step) that raised is a failure too, not only a failed tool call.
        "failures": facts.failed_calls + (facts.status == "failed"),
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "wall_s": (finished - facts.started_at).total_seconds() if finished else None,
        "cost_usd": cost,
        "saved_usd": saved,
        "reused": reused,
        "changed": "" if reused else changed,
    }
