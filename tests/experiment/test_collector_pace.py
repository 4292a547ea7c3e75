"""While an experiment runs, the cyclic collector runs less often (its thresholds are raised,
never lowered); they are put back when it ends, however it ends, and a collector turned
off stays off."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from helpers import THRESHOLDS_SEEN, default_thresholds, pace_workflow

from thena_nb.core._collector import RUN_THRESHOLDS, fewer_collections
from thena_nb.experiments import run_experiment


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    with default_thresholds() as defaults:
        yield defaults


def test_an_experiment_raises_the_thresholds_and_puts_them_back(
    thresholds: tuple[int, int, int],
) -> None:
    exp = run_experiment(pace_workflow(), ["a", "b", "c"], store=False, progress=False)
    assert [r.output for r in exp.runs] == ["done"] * 3
    assert THRESHOLDS_SEEN == [RUN_THRESHOLDS] * 3
    assert gc.get_threshold() == thresholds


def test_a_failing_experiment_puts_them_back_too(thresholds: tuple[int, int, int]) -> None:
    exp = run_experiment(pace_workflow(), ["a", "boom"], store=False, progress=False)
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
        run_experiment(pace_workflow(), ["a"], store=False, progress=False)
        assert not gc.isenabled()
    finally:
        gc.enable()
