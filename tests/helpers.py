"""Small builders shared by the core and semantics tests."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Iterator

from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.core.records.model import ModelRequest, Reply
from thena_nb.models import FunctionModel, ScriptedModel, reply


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
    waits until it is cancelled, or until the test sets `release`: a test can act while
    that call is surely in flight, whatever the machine's load."""

    def __init__(self, replies: list[object], hold_at: int) -> None:
        self.scripted = ScriptedModel(replies)  # type: ignore[arg-type]
        self.name = self.scripted.name
        self.hold_at = hold_at
        self.calls = 0
        self.held = asyncio.Event()
        self.release = asyncio.Event()

    async def respond(self, request: ModelRequest) -> Reply:
        self.calls += 1
        if self.calls == self.hold_at:
            self.held.set()
            await self.release.wait()  # until released, or cancelled
        return await self.scripted.respond(request)


THRESHOLDS_SEEN: list[tuple[int, int, int]] = []
"""The collector's thresholds `peek` saw, one entry per call."""


@tool
def peek() -> str:
    """Note the collector's thresholds as the tool runs."""
    THRESHOLDS_SEEN.append(gc.get_threshold())
    return "ok"


def _peek_then_answer(request: ModelRequest) -> object:
    if not any(m.role == "tool" for m in request.messages):
        return reply.tool("peek")
    if request.messages[0].content == "boom":
        raise RuntimeError("the model broke")
    return "done"


def pace_workflow() -> Workflow:
    """Calls `peek` once, then answers; on the input `"boom"` its model raises instead."""
    agent = Agent("A", model=FunctionModel(_peek_then_answer), tools=[peek])
    return Workflow("pace", [loop(steps=[agent], until=until_answered, max_iterations=3)])


@contextlib.contextmanager
def default_thresholds() -> Iterator[tuple[int, int, int]]:
    """Python's default thresholds for the block, `THRESHOLDS_SEEN` emptied; put back after."""
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    THRESHOLDS_SEEN.clear()
    try:
        yield (700, 10, 10)
    finally:
        gc.set_threshold(*before)


TURNS_TABLE = (
    "(SELECT r.run_id AS run_id, t.turn_key & 4294967295 AS idx, t.* "
    "FROM thena_turn_rows t JOIN thena_runs r ON t.turn_key >> 32 = r.run_no)"
)
"""A run store's turn rows with their run id and index, as SQL to select from."""


def turn_rows_where(condition: str) -> str:
    """An SQL condition on `thena_turn_rows`: the rows whose run id and index (`run_id`,
    `idx`) meet `condition`, e.g. `UPDATE thena_turn_rows SET ... WHERE {this}`."""
    return f"turn_key IN (SELECT turn_key FROM {TURNS_TABLE} WHERE {condition})"
