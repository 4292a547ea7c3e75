"""The rate-limit gates that local runs of an experiment wait at (one per model), and the
model wrapper.

Only a rate limit closes a gate (HTTP 429, Anthropic's 529 "overloaded", or any error that
says when to come back with `retry_after`): other transient errors (a reset connection, a
timeout) are one call's trouble, retried by that run alone, and must not pause the rest.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from thena_nb.core.engine.foreign import ForeignAgent
from thena_nb.core.parts.agent import Agent
from thena_nb.core.parts.changes import apply_changes
from thena_nb.core.parts.steps import walk
from thena_nb.core.records.errors import TransientModelError
from thena_nb.core.records.model import ModelRequest, Reply
from thena_nb.core.workflow import Workflow

__all__ = ["Gate", "GatedModel", "Gates", "gated", "is_rate_limit"]

_RATE_LIMIT_STATUSES = (429, 529)


def is_rate_limit(exc: TransientModelError) -> bool:
    """A rate limit (or overload) that every caller of the model should wait out."""
    return exc.retry_after is not None or exc.status_code in _RATE_LIMIT_STATUSES


class Gate:
    """Shared by every run of an experiment: after a rate limit, nobody calls until it opens."""

    def __init__(self, fallback_wait: float) -> None:
        self.fallback_wait = fallback_wait
        self.opens_at = 0.0
        self.slowdowns = 0

    async def wait(self) -> None:
        """Return once the gate is open (at once when it is)."""
        while (delay := self.opens_at - time.monotonic()) > 0:
            await asyncio.sleep(delay)

    def close_for(self, seconds: float | None) -> None:
        """Close the gate for `seconds` (the rate limit's `retry_after`), or for the retry
        policy's first delay when the limit gave none; closing an open gate is a slowdown."""
        until = time.monotonic() + (self.fallback_wait if seconds is None else seconds)
        if until > self.opens_at:
            if self.opens_at <= time.monotonic():
                self.slowdowns += 1
            self.opens_at = until


class GatedModel:
    """A model that waits at the experiment's gate before each call and closes it on a rate
    limit. Its `name` is the wrapped model's, so request keys (and replays) are unchanged."""

    def __init__(self, model: Any, gate: Gate) -> None:
        self.model = model
        self.name = getattr(model, "name", type(model).__name__)
        self._gate = gate

    async def respond(self, request: ModelRequest) -> Reply:
        """The wrapped model's reply, asked for once the gate is open."""
        if self._gate.opens_at > time.monotonic():  # closed: no coroutine when it is open
            await self._gate.wait()
        try:
            reply: Reply = await self.model.respond(request)
        except TransientModelError as exc:
            if is_rate_limit(exc):
                self._gate.close_for(exc.retry_after)
            raise
        return reply

    @property
    def provider(self) -> Any:
        """The wrapped model's `provider`, so its turns are priced as its own
        (`Turn.cost_usd`); `False` when it has none (an offline model)."""
        return getattr(self.model, "provider", False)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def __repr__(self) -> str:
        return repr(self.model)


class Gates:
    """One `Gate` per model object, shared by every run and variant that uses that model: a
    rate limit from one provider does not pause the calls to another."""

    def __init__(self, fallback_wait: float) -> None:
        self.fallback_wait = fallback_wait
        self._by_model: dict[int, tuple[Any, GatedModel]] = {}

    def wrap(self, model: Any) -> GatedModel:
        """The gated wrapper of `model` (the same wrapper, and gate, every time)."""
        found = self._by_model.get(id(model))
        if found is None:
            found = self._by_model[id(model)] = (model, GatedModel(model, Gate(self.fallback_wait)))
        return found[1]

    @property
    def slowdowns(self) -> int:
        """Times a rate limit closed an open gate, over every model."""
        return sum(wrapper._gate.slowdowns for _, wrapper in self._by_model.values())


def gated(workflow: Workflow, gates: Gates) -> Workflow:
    """A copy of `workflow` whose agents call their models through their model's gate (one
    wrapper per model, so agents that share a model share its wrapper)."""
    changes: dict[str, dict[str, Any]] = {}
    for path, step in walk(workflow.steps, workflow.name):
        # Another framework's agent calls its own model, through its own client.
        if isinstance(step, Agent) and not isinstance(step, ForeignAgent):
            changes[path] = {"model": gates.wrap(step.model)}
    return apply_changes(workflow, changes)
