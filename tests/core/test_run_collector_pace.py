"""While a run goes to its end (`wf.run`, `wf.arun`) the cyclic collector runs less often: its
thresholds are raised (never lowered) and put back when the run ends, however it ends. A
stepping session, which may wait for a person, leaves them alone."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest
from helpers import THRESHOLDS_SEEN, default_thresholds, pace_workflow

from thena_nb.core._collector import RUN_THRESHOLDS


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    with default_thresholds() as defaults:
        yield defaults


def test_a_run_raises_the_thresholds_and_puts_them_back(
    thresholds: tuple[int, int, int],
) -> None:
    run = pace_workflow().run("go", store=False)
    assert run.output == "done"
    assert THRESHOLDS_SEEN == [RUN_THRESHOLDS]
    assert gc.get_threshold() == thresholds


def test_arun_does_too(thresholds: tuple[int, int, int]) -> None:
    run = asyncio.run(pace_workflow().arun("go", store=False))
    assert run.output == "done"
    assert THRESHOLDS_SEEN == [RUN_THRESHOLDS]
    assert gc.get_threshold() == thresholds


def test_a_failed_run_puts_them_back(thresholds: tuple[int, int, int]) -> None:
    with pytest.raises(RuntimeError, match="the model broke"):
        pace_workflow().run("boom", store=False)
    assert THRESHOLDS_SEEN == [RUN_THRESHOLDS]
    assert gc.get_threshold() == thresholds


def test_higher_thresholds_are_kept(thresholds: tuple[int, int, int]) -> None:
    gc.set_threshold(100_000, 5, 500)
    pace_workflow().run("go", store=False)
    assert [(100_000, RUN_THRESHOLDS[1], 500)] == THRESHOLDS_SEEN
    assert gc.get_threshold() == (100_000, 5, 500)


def test_a_stepping_session_leaves_them_alone(thresholds: tuple[int, int, int]) -> None:
    async def walk() -> None:
        s = pace_workflow().session("go", store=False)
        while await s.step() is not None:
            pass

    asyncio.run(walk())
    assert [thresholds] == THRESHOLDS_SEEN
