"""`exp.diff(a, b, repeat=k)`: with repeats, the diff names the repeat it compares."""

from __future__ import annotations

import pytest

from thena_nb import Agent, Workflow
from thena_nb.experiments import Experiment
from thena_nb.models import ScriptedModel


def _experiment(repeats: int) -> Experiment:
    wf = Workflow("hello", [Agent("Greeter", model=ScriptedModel(["Hello!"]))])
    variants = {"plain": {}, "brief": {"Greeter": {"system": "Be brief."}}}
    return wf.map(["hi"], variants=variants, repeats=repeats, store=False, progress=False)


def test_repeat_k_diffs_the_runs_of_that_repeat() -> None:
    exp = _experiment(3)
    ids = exp.run_ids  # (input, variant, repeat) order: plain 0, 1, 2, then brief 0, 1, 2
    for k in range(3):
        d = exp.diff("plain", "brief", repeat=k)
        assert (d.a.run_id, d.b.run_id) == (ids[k], ids[3 + k])
        assert d.first_divergence is not None
        assert d.first_divergence.changed == ("system",)
    assert exp.diff("plain", "plain", repeat=1).first_divergence is None


def test_with_repeats_a_diff_without_repeat_says_to_pass_one() -> None:
    exp = _experiment(3)
    with pytest.raises(ValueError) as caught:
        exp.diff("plain", "brief")
    assert str(caught.value) == (
        "the experiment has 3 repeats of each run (`repeats=3`); say which to diff with "
        "`repeat=k`, 0-based: 0, 1, 2"
    )


@pytest.mark.parametrize("repeat", [3, -1, 1.0, True, "0"])
def test_a_repeat_out_of_range_is_a_clear_error(repeat: object) -> None:
    exp = _experiment(3)
    with pytest.raises(ValueError) as caught:
        exp.diff("plain", "brief", repeat=repeat)  # type: ignore[arg-type]
    assert str(caught.value) == (
        f"the experiment has no repeat {repeat!r}; `repeat=` is 0-based: 0, 1, 2"
    )


def test_without_repeats_repeat_is_optional_and_only_0_is_valid() -> None:
    exp = _experiment(1)
    assert exp.diff("plain", "brief").a.run_id == exp.diff("plain", "brief", repeat=0).a.run_id
    with pytest.raises(ValueError, match=r"no repeat 1; `repeat=` is 0-based: 0$"):
        exp.diff("plain", "brief", repeat=1)


def test_many_repeats_are_listed_in_short() -> None:
    exp = _experiment(12)
    with pytest.raises(ValueError, match=r"0-based: 0 to 11$"):
        exp.diff("plain", "brief")
