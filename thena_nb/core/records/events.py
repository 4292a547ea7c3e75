"""`Event`: what a session reports as it happens (`Session.subscribe`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from thena_nb.core.records.types import LoopStopReason, ToolCall, Turn, construct

__all__ = ["Event", "EventKind", "event"]

EventKind = Literal[
    "turn_started",
    "text_delta",
    "tool_started",
    "tool_finished",
    "turn_finished",
    "loop_stopped",
    "run_finished",
]


class Event(BaseModel):
    """Something that happened in a run, as `Session.subscribe` reports it."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    kind: EventKind
    path: str | None = None
    agent: str | None = None
    text: str | None = None
    """`text_delta`: the new piece of text."""
    turn: Turn | None = None
    """`turn_finished`: the recorded turn."""
    tool_call: ToolCall | None = None
    stop_reason: LoopStopReason | None = None
    """`loop_stopped`: why the loop at `path` stopped."""


_EVENT_FIELDS = tuple(Event.model_fields)


def event(kind: EventKind, **fields: Any) -> Event:
    """An `Event` built without validation: the executor makes several per turn."""
    values: dict[str, Any] = dict.fromkeys(_EVENT_FIELDS)
    values.update(fields, kind=kind)
    return construct(Event, values)
