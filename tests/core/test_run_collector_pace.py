"""While a run goes to its end (`wf.run`, `wf.arun`) the cyclic collector runs less often: its
thresholds are raised (never lowered) and put back when the run ends, however it ends. A
stepping session, which may wait for a person, leaves them alone."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.core._collector import RUN_THRESHOLDS
from thena_nb.models import FunctionModel, ModelRequest, reply

seen: list[tuple[int, int, int]] = []


@tool
def peek() -> str:
    """Note the collector's thresholds as the tool runs."""
    seen.append(gc.get_threshold())
    return "ok"


def peek_then_answer(request: ModelRequest) -> object:
    if not any(m.role == "tool" for m in request.messages):
        return reply.tool("peek")
    if request.messages[0].content == "boom":
        raise RuntimeError("the model broke")
    return "done"


def workflow() -> Workflow:
    agent = Agent("A", model=FunctionModel(peek_then_answer), tools=[peek])
    return Workflow("pace", [loop(steps=[agent], until=until_answered, max_iterations=3)])


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    seen.clear()
    yield (700, 10, 10)
    gc.set_threshold(*before)


def test_a_run_raises_the_thresholds_and_puts_them_back(
    thresholds: tuple[int, int, int],
) -> None:
    run = workflow().run("go", store=False)
    assert run.output == "done"
    assert seen == [RUN_THRESHOLDS]
    assert gc.get_threshold() == thresholds


def test_arun_does_too(thresholds: tuple[int, int, int]) -> None:
    run = asyncio.run(workflow().arun("go", store=False))
    assert run.output == "done"
    assert seen == [RUN_THRESHOLDS]
    assert gc.get_threshold() == thresholds


def test_a_failed_run_puts_them_back(thresholds: tuple[int, int, int]) -> None:
    with pytest.raises(RuntimeError, match="the model broke"):
        workflow().run("boom", store=False)
    assert seen == [RUN_THRESHOLDS]
    assert gc.get_threshold() == thresholds


def test_higher_thresholds_are_kept(thresholds: tuple[int, int, int]) -> None:
    gc.set_threshold(100_000, 5, 500)
    workflow().run("go", store=False)
    assert seen == [(100_000, RUN_THRESHOLDS[1], 500)]
    assert gc.get_threshold() == (100_000, 5, 500)


def test_a_stepping_session_leaves_them_alone(thresholds: tuple[int, int, int]) -> None:
    async def walk() -> None:
        s = workflow().session("go", store=False)
        while await s.step() is not None:
            pass

    asyncio.run(walk())
    assert seen == [thresholds]
