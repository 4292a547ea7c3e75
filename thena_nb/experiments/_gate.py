"""The rate-limit gate that every local run of an experiment waits at, and the model wrapper."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from thena_nb.core.agent import Agent
from thena_nb.core.changes import apply_changes
from thena_nb.core.errors import TransientModelError
from thena_nb.core.model import ModelRequest, Reply
from thena_nb.core.steps import walk
from thena_nb.core.workflow import Workflow

__all__ = ["Gate", "GatedModel", "gated"]


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
        await self._gate.wait()
        try:
            reply: Reply = await self.model.respond(request)
        except TransientModelError as exc:
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


def gated(workflow: Workflow, gate: Gate) -> Workflow:
    """A copy of `workflow` whose agents call their models through `gate` (one wrapper per
    model, so agents that share a model share its wrapper)."""
    wrappers: dict[int, GatedModel] = {}
    changes: dict[str, dict[str, Any]] = {}
    for path, step in walk(workflow.steps, workflow.name):
        if isinstance(step, Agent):
            if id(step.model) not in wrappers:
                wrappers[id(step.model)] = GatedModel(step.model, gate)
            changes[path] = {"model": wrappers[id(step.model)]}
    return apply_changes(workflow, changes)
