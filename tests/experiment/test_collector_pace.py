"""While an experiment runs, the cyclic collector runs less often (its thresholds are raised,
never lowered); they are put back when it ends, however it ends, and a collector turned
off stays off."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.core._collector import RUN_THRESHOLDS, fewer_collections
from thena_nb.experiments import run_experiment
from thena_nb.models import FunctionModel, ModelRequest, reply

SEEN: list[tuple[int, int, int]] = []


@tool
def peek() -> str:
    """Note the collector's thresholds as the tool runs, inside the experiment."""
    SEEN.append(gc.get_threshold())
    return "ok"


def once_then_done(request: ModelRequest) -> object:
    if not any(m.role == "tool" for m in request.messages):
        return reply.tool("peek")
    if request.messages[0].content == "boom":
        raise RuntimeError("the model broke")
    return "done"


def workflow() -> Workflow:
    agent = Agent("A", model=FunctionModel(once_then_done), tools=[peek])
    return Workflow("pace", [loop(steps=[agent], until=until_answered, max_iterations=3)])


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    SEEN.clear()
    yield (700, 10, 10)
    gc.set_threshold(*before)


def test_an_experiment_raises_the_thresholds_and_puts_them_back(
    thresholds: tuple[int, int, int],
) -> None:
    exp = run_experiment(workflow(), ["a", "b", "c"], store=False, progress=False)
    assert [r.output for r in exp.runs] == ["done"] * 3
    assert SEEN == [RUN_THRESHOLDS] * 3
    assert gc.get_threshold() == thresholds


def test_a_failing_experiment_puts_them_back_too(thresholds: tuple[int, int, int]) -> None:
    exp = run_experiment(workflow(), ["a", "boom"], store=False, progress=False)
    assert [r.status for r in exp.runs] == ["finished", "failed"]
    assert gc.get_threshold() == thresholds


def test_higher_thresholds_of_ones_own_are_kept() -> None:
    before = gc.get_threshold()
    gc.set_threshold(100_000, 5, 500)
    try:
        with fewer_collections():
            assert gc.get_threshold() == (100_000, RUN_THRESHOLDS[1], 500)
        assert gc.get_threshold() == (100_000, 5, 500)
    finally:
        gc.set_threshold(*before)


def test_nested_blocks_undo_once_when_the_last_ends(thresholds: tuple[int, int, int]) -> None:
    with fewer_collections():
        with fewer_collections():
            assert gc.get_threshold() == RUN_THRESHOLDS
        assert gc.get_threshold() == RUN_THRESHOLDS  # the outer block still runs
    assert gc.get_threshold() == thresholds


def test_a_collector_turned_off_stays_off(thresholds: tuple[int, int, int]) -> None:
    gc.disable()
    try:
        run_experiment(workflow(), ["a"], store=False, progress=False)
        assert not gc.isenabled()
    finally:
        gc.enable()
