"""`Plan`: what the engine, a fork and a change read of a workflow's definition.

`Workflow` (in `core/workflow.py`, above the engine that runs it) is the one plan users
write; the floors below it name what they read of it here, so that none imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel

from thena_nb.core.records.types import Budget, RetryPolicy

__all__ = ["Plan"]


class Plan(Protocol):
    """A workflow's definition: its name, steps, state class and run-wide limits.

    Example:
        >>> from thena_nb import Agent, Workflow
        >>> from thena_nb.core.parts.plan import Plan
        >>> from thena_nb.models import ScriptedModel
        >>> plan: Plan = Workflow("w", [Agent("A", model=ScriptedModel(["hi"]))])
        >>> plan.name, len(plan.steps)
        ('w', 1)
    """

    name: str
    steps: list[Any]
    state: type[BaseModel] | None
    budget: Budget | None
    retry: RetryPolicy
    tool_timeout: float | None
    max_tool_result_chars: int | None

    def __init__(
        self,
        name: str,
        steps: Sequence[Any],
        *,
        state: type[BaseModel] | None = None,
        budget: Budget | None = None,
        retry: RetryPolicy | None = None,
        tool_timeout: float | None = None,
        max_tool_result_chars: int | None = ...,
    ) -> None: ...
