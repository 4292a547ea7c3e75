"""Decisions on gated tool calls, as records: what a run keeps, stores and resumes from.

`Decision` says what to do with a call a gate held, `PendingCall` is a held call waiting for
one; a waiting run stores its pending calls (`pending_json`) and reads them back
(`pending_from_json`). The gates that hold calls and apply decisions are `engine/gates.py`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, model_validator

from thena_nb.core.records._text import to_text
from thena_nb.core.records.types import ToolCall, ToolDecision, Turn, finished

__all__ = [
    "Approver",
    "Decision",
    "PendingCall",
    "pending_from_json",
    "pending_json",
    "proposed_call",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class Decision(BaseModel):
    """What to do with a gated tool call. Build one with its four constructors.

    Example:
        >>> from thena_nb import Decision
        >>> Decision.approve().kind, Decision.edit({"amount": 50}).arguments
        ('approve', {'amount': 50})
        >>> Decision.reject("too much").reason, Decision.respond({"paid": False}).result
        ('too much', '{"paid": false}')
    """

    model_config = _FROZEN

    kind: ToolDecision
    """`"approve"`, `"edit"`, `"reject"` or `"respond"`."""
    arguments: dict[str, Any] | None = None
    """An edit's arguments, which the tool runs with instead of the model's."""
    reason: str | None = None
    """A rejection's reason: the call fails and the model is told this."""
    result: str | None = None
    """A response's result: the tool does not run and the model gets this as its result."""

    @model_validator(mode="after")
    def _complete(self) -> Decision:
        needs = {"edit": "arguments", "reject": "reason", "respond": "result"}.get(self.kind)
        if needs is not None and getattr(self, needs) is None:
            raise ValueError(f"a {self.kind!r} decision needs `{needs}`; use Decision.{self.kind}")
        return self

    @classmethod
    def approve(cls) -> Decision:
        """Run the call as the model made it."""
        return cls(kind="approve")

    @classmethod
    def edit(cls, arguments: Mapping[str, Any]) -> Decision:
        """Run the call with `arguments` instead (checked against the tool's schema)."""
        return cls(kind="edit", arguments=dict(arguments))

    @classmethod
    def reject(cls, reason: str = "it was rejected") -> Decision:
        """Do not run the call: it fails, and the model is told `reason`."""
        return cls(kind="reject", reason=str(reason))

    @classmethod
    def respond(cls, result: Any) -> Decision:
        """Do not run the tool: the model gets `result` (as text) as the call's result."""
        return cls(kind="respond", result=to_text(result))


class PendingCall(BaseModel):
    """A gated call waiting for its `Decision`."""

    model_config = _FROZEN

    call: ToolCall
    """The call as the model made it."""
    turn_index: int
    """The index the call's turn will have in `run.turns`."""
    step_path: str
    """The step path of the agent that made the call."""
    agent: str
    """The name of that agent."""
    gate_error: str | None = None
    """The error a gate raised on the call's arguments (`"KeyError: 'amount'"`), or `None`:
    a gate that raises holds the call (fail safe), and this says why it was held."""


Approver = Callable[[PendingCall], "Decision | Awaitable[Decision]"]
"""`fn(pending_call) -> Decision`, sync or async: decides every gated call of a run."""


def proposed_call(call: ToolCall) -> ToolCall:
    """A recorded call as the model made it, before any outcome or decision."""
    original = call.original_arguments
    return finished(
        call,
        ok=None,
        result=None,
        error=None,
        retries=0,
        decision=None,
        original_arguments=None,
        traceback=None,
        result_cut=None,
        arguments=original if original is not None else call.arguments,
    )


class _Waiting(Protocol):
    """What `pending_json` reads of a run."""

    @property
    def pending_turn(self) -> Turn | None: ...

    @property
    def pending(self) -> Sequence[PendingCall]: ...


def pending_json(run: _Waiting) -> dict[str, Any] | None:
    """What a waiting run stores of its waiting turn (`None` for any other run)."""
    turn = run.pending_turn
    if turn is None:
        return None
    return {
        "turn": turn.model_dump(mode="json"),
        "calls": [p.model_dump(mode="json") for p in run.pending],
    }


def pending_from_json(data: Any) -> tuple[list[PendingCall], Turn | None]:
    """`run.pending` and `run.pending_turn` back from `pending_json`'s data."""
    if not data:
        return [], None
    calls = [PendingCall.model_validate(p) for p in data.get("calls") or ()]
    return calls, Turn.model_validate(data["turn"])
