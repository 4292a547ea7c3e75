"""The rate-limit gate that every local run of an experiment waits at, and the model wrapper."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import Any

from thena_nb.core.agent import Agent
from thena_nb.core.errors import TransientModelError
from thena_nb.core.model import ModelRequest, Reply
from thena_nb.core.steps import LoopStep, ParallelStep
from thena_nb.core.workflow import Workflow

__all__ = ["Gate", "GatedModel", "gated"]


class Gate:
    """Shared by every run of an experiment: after a rate limit, nobody calls until it opens."""

    def __init__(self, fallback_wait: float) -> None:
        self.fallback_wait = fallback_wait
        self.opens_at = 0.0
        self.slowdowns = 0

    async def wait(self) -> None:
        while (delay := self.opens_at - time.monotonic()) > 0:
            await asyncio.sleep(delay)

    def close_for(self, seconds: float | None) -> None:
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
        await self._gate.wait()
        try:
            reply: Reply = await self.model.respond(request)
        except TransientModelError as exc:
            self._gate.close_for(exc.retry_after)
            raise
        return reply

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def __repr__(self) -> str:
        return repr(self.model)


def gated(workflow: Workflow, gate: Gate) -> Workflow:
    """A copy of `workflow` whose agents call their models through `gate`."""
    wrapped: dict[int, GatedModel] = {}

    def wrap(agent: Agent) -> Agent:
        model = agent.model
        if id(model) not in wrapped:
            wrapped[id(model)] = GatedModel(model, gate)
        return agent.replace(model=wrapped[id(model)])

    return _map_agents(workflow, wrap)


def _rebuilt(workflow: Workflow, steps: list[Any]) -> Workflow:
    return Workflow(
        workflow.name, steps, state=workflow.state, budget=workflow.budget, retry=workflow.retry
    )


def _map_agents(workflow: Workflow, fn: Callable[[Agent], Agent]) -> Workflow:
    """A copy of `workflow` with every agent replaced by `fn(agent)` (once per agent)."""
    memo: dict[int, Agent] = {}

    def walk(step: Any) -> Any:
        if isinstance(step, Agent):
            if id(step) not in memo:
                memo[id(step)] = fn(step)
            return memo[id(step)]
        if isinstance(step, LoopStep | ParallelStep):
            return dataclasses.replace(step, steps=tuple(walk(s) for s in step.steps))
        return step

    return _rebuilt(workflow, [walk(s) for s in workflow.steps])
