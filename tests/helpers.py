"""Small builders shared by the core and semantics tests."""

from __future__ import annotations

from thena_nb import Agent, tool
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
