"""Cost in dollars: `Turn.cost_usd`, `Usage.cost_usd`, `run.cost_usd`, `Budget(max_cost_usd=)`,
replays that cost nothing and say what they saved, and the cost columns of frames and
experiments.

A scripted model that names a provider stands for a billed model here (its turns are priced
from the scripted token counts); the adapters are tested through their HTTP servers in
`tests/models/test_cost_adapters.py`.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from genai_prices import Usage as PricedUsage
from genai_prices import calc_price
from helpers import add

from thena_nb import Agent, Budget, Run, Usage, Workflow, loop, until_answered
from thena_nb.core.records.model import Reply
from thena_nb.cost import UnpricedModelWarning
from thena_nb.models import FunctionModel, ScriptedModel, reply
from thena_nb.store import MemoryRunStore, SqliteRunStore

SONNET = "claude-sonnet-4-0"


class Billed(ScriptedModel):
    """A scripted model billed as Anthropic bills its `name`."""

    provider = "anthropic"


def priced(tokens: dict[str, int], model: str = SONNET) -> float:
    """What genai-prices says a call with `tokens` costs (`input_tokens` counts the cache)."""
    return float(calc_price(PricedUsage(**tokens), model, provider_id="anthropic").total_price)


TURN = {"input_tokens": 1_000, "output_tokens": 100}
CALL = reply.tool("add", a=1, b=1, **TURN)


def sums(model: ScriptedModel, **kw: object) -> Workflow:
    calc = Agent("Calc", model=model, tools=[add])
    return Workflow("sums", [loop(steps=[calc], until=until_answered)], **kw)  # type: ignore[arg-type]


def unknown_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, UnpricedModelWarning)]


def test_a_priced_turn_costs_what_genai_prices_says_for_its_tokens() -> None:
    tokens = {"input_tokens": 1_900, "output_tokens": 300, "cache_read_tokens": 500,
              "cache_write_tokens": 200}  # fmt: skip
    model = Billed([Reply(text="hi", **tokens)], name=SONNET)
    run = Workflow("w", [Agent("A", model=model)]).run("x", store=False)
    (turn,) = run.turns
    assert turn.cost_usd == priced(tokens)
    assert turn.cost_usd != priced({"input_tokens": 1_900, "output_tokens": 300})  # cache counts
    assert turn.saved_usd is None
    assert run.cost_usd == run.usage.cost_usd == run.usage.known_cost_usd == turn.cost_usd
    assert run.usage.unpriced_turns == 0


def test_the_run_cost_is_the_sum_of_its_turns() -> None:
    run = sums(Billed([CALL, CALL, reply.text("2", **TURN)], name=SONNET)).run("x", store=False)
    assert [t.cost_usd for t in run.turns] == [priced(TURN)] * 3
    assert run.cost_usd == pytest.approx(3 * priced(TURN))
    assert Usage.of(run.turns).cost_usd == pytest.approx(run.cost_usd)
    assert f"cost=${3 * priced(TURN):.6f}".rstrip("0") in repr(run)


def test_offline_models_cost_none_without_a_warning_and_without_loading_genai_prices() -> None:
    script = """
import sys, warnings
warnings.simplefilter("error")
from thena_nb import Agent, Workflow
from thena_nb.models import FunctionModel, ScriptedModel
agents = [Agent("A", model=ScriptedModel(["a"] * 3)), Agent("B", model=FunctionModel(lambda r: "b"))]
run = Workflow("w", agents).run("x", store=False)
assert [t.cost_usd for t in run.turns] == [None, None], run.turns
assert run.cost_usd is None and run.usage.unpriced_turns == 2
assert "genai_prices" not in sys.modules and "thena_nb.cost" not in sys.modules
print("ok")
"""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=root, timeout=120,
        env={"PYTHONPATH": str(root), "THENA_NB_STORE": "off", "PATH": ""},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok" and done.stderr == ""


def test_an_offline_run_repr_shows_no_cost() -> None:
    run = Workflow("w", [Agent("A", model=FunctionModel(lambda r: "hi"))]).run("x", store=False)
    assert "cost" not in repr(run) and "saved" not in repr(run)


@pytest.mark.parametrize(
    ("provider", "name"),
    [
        ("anthropic", "claude-no-such-model-cost-test"),
        ("no-such-provider", "no-provider-cost-test"),
    ],
)
def test_an_unknown_model_costs_none_with_one_warning_over_many_turns(
    provider: str, name: str
) -> None:
    model = Billed([CALL, CALL, CALL, reply.text("3", **TURN)], name=name)
    model.provider = provider
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = sums(model).run("x", store=False)
        again = sums(Billed([CALL, "done"], name=name)).run("x", store=False)
    assert [t.cost_usd for t in run.turns] == [None] * 4
    assert again.turns[0].cost_usd is None
    assert run.cost_usd is None and run.usage.unpriced_turns == 4
    (message,) = unknown_warnings(caught)
    assert repr(name) in message and "cost_usd=None" in message


def test_a_run_with_an_unpriced_turn_has_no_total_but_keeps_the_known_part() -> None:
    billed = Agent("Billed", model=Billed([reply.text("a", **TURN)], name=SONNET))
    offline = Agent("Offline", model=ScriptedModel(["b"]))
    run = Workflow("w", [billed, offline]).run("x", store=False)
    assert [t.cost_usd for t in run.turns] == [priced(TURN), None]
    assert run.cost_usd is None
    assert run.usage.known_cost_usd == priced(TURN) and run.usage.unpriced_turns == 1
    assert "cost=" not in repr(run)  # never a number that falls short


def test_a_cost_budget_stops_the_loop_with_budget() -> None:
    limit = 2.5 * priced(TURN)
    wf = sums(Billed([CALL] * 9, name=SONNET), budget=Budget(max_cost_usd=limit))
    run = wf.run("x", store=False)
    assert run.status == "budget"
    assert run.loops[0].stop_reason == "budget"
    assert len(run.turns) == 3  # the third turn went past the limit; no fourth call
    assert run.usage.model_calls == 3
    assert f"max_cost_usd={limit}" in (run.error or "")
    assert repr(Budget(max_cost_usd=0.5)) == "Budget(max_cost_usd=0.5)"


def test_a_cost_budget_counts_nothing_for_unpriced_turns() -> None:
    wf = sums(ScriptedModel([CALL, CALL, "done"]), budget=Budget(max_cost_usd=0.000001))
    run = wf.run("x", store=False)
    assert run.status == "finished" and len(run.turns) == 3


def test_a_replay_costs_nothing_and_says_what_it_saved() -> None:
    wf = sums(Billed([CALL, CALL, reply.text("2", **TURN)], name=SONNET))
    first = wf.run("x", store=False)
    again = wf.run("x", replay=first, store=False)
    assert all(t.replayed for t in again.turns)
    assert [t.cost_usd for t in again.turns] == [0.0, 0.0, 0.0]
    assert [t.saved_usd for t in again.turns] == [t.cost_usd for t in first.turns]
    assert again.cost_usd == 0.0
    assert again.usage.saved_usd == pytest.approx(first.cost_usd)
    saved = f"saved=${3 * priced(TURN):.6f}".rstrip("0")
    assert saved in repr(again) and "cost=$0," in repr(again)
    assert "saved" not in repr(first)
    # A replay of the replay saved the same: what the calls cost when they were made.
    third = wf.run("x", replay=again, store=False)
    assert [t.saved_usd for t in third.turns] == [t.cost_usd for t in first.turns]


def test_a_cost_budget_counts_what_a_replay_spends_live_only() -> None:
    wf = sums(Billed([CALL, CALL, CALL, reply.text("3", **TURN)], name=SONNET))
    first = wf.run("x", store=False)
    assert first.status == "finished" and len(first.turns) == 4
    budget = Budget(max_cost_usd=1.5 * priced(TURN))
    replayed = sums(Billed([CALL] * 9, name=SONNET), budget=budget)
    again = replayed.run("x", replay=first, store=False)
    assert again.status == "finished" and again.cost_usd == 0.0


def test_a_fork_pays_only_for_the_turns_it_runs_live() -> None:
    wf = sums(Billed([CALL, CALL, reply.text("2", **TURN)], name=SONNET))
    first = wf.run("x", store=False)
    answer = {"Calc": {"model": Billed([reply.text("2", **TURN)], name=SONNET)}}
    forked = first.fork(2, changes=answer, store=False)
    assert [t.replayed for t in forked.turns] == [True, True, False]
    assert [t.cost_usd for t in forked.turns] == [0.0, 0.0, priced(TURN)]
    assert forked.cost_usd == priced(TURN)
    assert forked.usage.saved_usd == pytest.approx(2 * priced(TURN))


def test_costs_survive_json_and_both_stores(tmp_path: Path) -> None:
    wf = sums(Billed([CALL, reply.text("1", **TURN)], name=SONNET))
    run = wf.run("x", store=False)
    back = Run.from_json(run.to_json())
    assert [t.cost_usd for t in back.turns] == [t.cost_usd for t in run.turns]
    assert back.usage == run.usage and back.cost_usd == run.cost_usd
    with SqliteRunStore.from_path(tmp_path / "runs.sqlite3") as sqlite:
        for store in (MemoryRunStore(), sqlite):
            stored = wf.run("x", store=store)
            loaded = Run.load(stored.run_id, store=store)
            assert [t.cost_usd for t in loaded.turns] == [priced(TURN)] * 2
            assert loaded.cost_usd == stored.cost_usd == pytest.approx(2 * priced(TURN))


def test_usage_from_turns_recorded_before_costs_were_kept_has_no_total() -> None:
    old = Usage.model_validate({"input_tokens": 3, "output_tokens": 1, "model_calls": 1})
    assert old.cost_usd == 0.0 and old.known_cost_usd == 0.0
    run = Workflow("w", [Agent("A", model=ScriptedModel(["a"]))]).run("x", store=False)
    legacy = run.turns[0].model_dump()
    del legacy["cost_usd"], legacy["saved_usd"]
    turn = type(run.turns[0]).model_validate(legacy)
    assert turn.cost_usd is None and Usage.of([turn]).cost_usd is None


def test_the_turn_frame_has_a_cost_usd_column() -> None:
    billed = sums(Billed([CALL, reply.text("1", **TURN)], name=SONNET)).run("x", store=False)
    frame = billed.frame()
    assert str(frame["cost_usd"].dtype) == "Float64"
    assert frame["cost_usd"].tolist() == [priced(TURN)] * 2
    offline = Workflow("w", [Agent("A", model=ScriptedModel(["a"]))]).run("x", store=False)
    assert offline.frame()["cost_usd"].isna().all()


def test_experiments_show_cost_and_what_reusing_the_store_saved() -> None:
    wf = sums(Billed([CALL, reply.text("1", **TURN)], name=SONNET))
    variants = {"billed": {}, "offline": {"Calc": {"model": ScriptedModel([CALL, "1"])}}}
    store = MemoryRunStore()
    first = wf.map(["a", "b"], variants=variants, store=store, progress=False)
    frame = first.frame()
    assert frame["cost_usd"].tolist()[::2] == [2 * priced(TURN)] * 2  # the billed runs
    assert frame["cost_usd"].isna().tolist()[1::2] == [True, True]  # the offline ones
    compare = first.compare()
    assert compare.loc["billed", "cost_usd"] == pytest.approx(4 * priced(TURN))
    assert compare["cost_usd"].isna().tolist() == [False, True]
    assert compare["saved_usd"].tolist() == [0.0, 0.0]

    again = wf.map(["a", "b"], variants=variants, store=store, progress=False)
    assert again.reused == 4
    assert again.frame()["cost_usd"].tolist() == [0.0] * 4  # no call was made
    compare = again.compare()
    assert compare.loc["billed", "cost_usd"] == 0.0
    assert compare.loc["billed", "saved_usd"] == pytest.approx(4 * priced(TURN))
    assert "saved" in again._repr_html_()
    assert again.rescore([]).compare().loc["billed", "saved_usd"] == pytest.approx(4 * priced(TURN))
