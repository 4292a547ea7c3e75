"""Small builders shared by the core and semantics tests."""

from __future__ import annotations

import asyncio

from thena_nb import Agent, tool
from thena_nb.core.model import ModelRequest, Reply
from thena_nb.models import ScriptedModel, reply


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def fail(reason: str = "boom") -> str:
    """A tool that always raises."""
    raise ValueError(reason)


def calc(replies: list[object], name: str = "Calc", **kw: object) -> Agent:
    """An agent with `add` and `fail` over a scripted model."""
    return Agent(name, model=ScriptedModel(replies), tools=[add, fail], **kw)  # type: ignore[arg-type]


def add_call(a: int = 1, b: int = 1) -> object:
    return reply.tool("add", a=a, b=b)


def fail_call() -> object:
    return reply.tool("fail")


class HeldModel:
    """A scripted model whose call number `hold_at` (1-based) starts, sets `held` and then
    waits until it is cancelled: a test can act while that call is surely in flight,
    whatever the machine's load."""

    def __init__(self, replies: list[object], hold_at: int) -> None:
        self.scripted = ScriptedModel(replies)  # type: ignore[arg-type]
        self.name = self.scripted.name
        self.hold_at = hold_at
        self.calls = 0
        self.held = asyncio.Event()

    async def respond(self, request: ModelRequest) -> Reply:
        self.calls += 1
        if self.calls == self.hold_at:
            self.held.set()
            await asyncio.Event().wait()  # until cancelled
        return await self.scripted.respond(request)
