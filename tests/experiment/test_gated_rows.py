"""Experiments with tool gates: a run that reaches a gate is a `waiting` row."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from thena_nb import Agent, Decision, PendingCall, Run, Workflow, loop, tool, until_answered
from thena_nb.experiments import run_experiment
from thena_nb.experiments._backends import RayWorker
from thena_nb.experiments._ray_pickle import dumps_workflows
from thena_nb.models import FunctionModel, ModelRequest, reply
from thena_nb.store import MemoryRunStore


def shop() -> tuple[Workflow, FunctionModel]:
    """`pay` over 100 waits for a decision; the model pays what the input says, then answers."""

    @tool(gate=lambda call: call.arguments["amount"] > 100)
    def pay(amount: int) -> str:
        """Pay an amount."""
        return f"paid {amount}"

    def clerk(request: ModelRequest) -> Any:
        if request.messages[-1].role == "tool":
            return "Paid."
        return reply.tool("pay", amount=int(request.messages[0].content))

    model = FunctionModel(clerk)
    agent = Agent("Clerk", model=model, tools=[pay])
    return Workflow("shop", [loop(steps=[agent], until=until_answered)]), model


def test_a_gated_run_is_a_waiting_row_kept_as_it_is_on_a_rerun() -> None:
    wf, model = shop()
    store = MemoryRunStore()
    exp = run_experiment(wf, ["50", "500"], store=store, progress=False)
    frame = exp.frame().set_index("input")
    assert frame.loc["50", "status"] == "finished"
    assert frame.loc["500", "status"] == "waiting"
    assert frame.loc["500", "stop_reasons"] == "waiting"
    statuses = exp.compare().loc["base", "statuses"]
    assert statuses in ("finished 1, waiting 1", "waiting 1, finished 1")
    waiting = next(r for r in exp.runs if r.status == "waiting")
    assert [p.call.arguments for p in waiting.pending] == [{"amount": 500}]
    calls = len(model.requests)
    again = run_experiment(wf, ["50", "500"], store=store, progress=False)
    assert again.reused == 2 and len(model.requests) == calls  # the waiting run is kept
    decision = {waiting.pending[0].call.id: Decision.edit({"amount": 100})}
    done = wf.resume(waiting.run_id, store=store, decisions=decision)
    assert done.status == "finished" and done.turns[0].tool_calls[0].result == "paid 100"
    last = run_experiment(wf, ["50", "500"], store=store, progress=False)
    assert sorted(last.frame()["status"]) == ["finished", "finished"]


# -- approve= ----------------------------------------------------------------------------------


def test_approve_decides_every_gated_call_of_a_map() -> None:
    """`wf.map(approve=)` takes what `wf.run(approve=)` takes and applies it to every run:
    an approved call runs its tool, a rejected one does not, and no run waits."""
    wf, _ = shop()
    seen: list[Any] = []

    def yes(pending: PendingCall) -> Decision:
        seen.append(pending.call.arguments)
        return Decision.approve()

    exp = wf.map(["50", "500", "700"], approve=yes, store=False, progress=False)
    runs = {r.input: r for r in exp.runs}
    assert sorted(exp.frame()["status"]) == ["finished"] * 3
    assert [c.result for c in runs["500"].turns[0].tool_calls] == ["paid 500"]
    assert runs["700"].turns[0].tool_calls[0].decision == "approve"
    assert sorted(a["amount"] for a in seen) == [500, 700]  # the gate holds only those

    no = wf.map(
        ["50", "500"], approve=lambda p: Decision.reject("over the limit"), store=False,
        progress=False,
    )  # fmt: skip
    by_input = {r.input: r for r in no.runs}
    call = by_input["500"].turns[0].tool_calls[0]
    assert (call.decision, call.ok) == ("reject", False)
    assert call.error == "Error: tool 'pay' was not run: over the limit"
    assert by_input["500"].status == "finished" and by_input["500"].output == "Paid."
    assert by_input["50"].turns[0].tool_calls[0].result == "paid 50"  # not gated


def test_an_async_approve_can_edit_the_calls() -> None:
    wf, _ = shop()

    async def cap(pending: PendingCall) -> Decision:
        return Decision.edit({"amount": 100})

    exp = run_experiment(wf, ["500"], approve=cap, store=False, progress=False)
    (run,) = exp.runs
    assert run.turns[0].tool_calls[0].result == "paid 100"


def test_runs_are_reused_only_under_the_same_approve() -> None:
    """A waiting row runs again once `approve=` is given; the same `approve` then reuses
    its runs, and another one runs them again."""
    wf, model = shop()
    store = MemoryRunStore()
    held = run_experiment(wf, ["500"], store=store, progress=False)
    assert held.frame()["status"].tolist() == ["waiting"]

    def yes(pending: PendingCall) -> Decision:
        return Decision.approve()

    approved = run_experiment(wf, ["500"], approve=yes, store=store, progress=False)
    assert approved.reused == 0 and approved.frame()["status"].tolist() == ["finished"]
    calls = len(model.requests)
    again = run_experiment(wf, ["500"], approve=yes, store=store, progress=False)
    assert again.reused == 1 and len(model.requests) == calls
    assert again.run_ids == approved.run_ids
    rejected = run_experiment(
        wf, ["500"], approve=lambda p: Decision.reject(), store=store, progress=False
    )
    assert rejected.reused == 0 and rejected.run_ids != approved.run_ids
    assert next(iter(rejected.runs)).turns[0].tool_calls[0].decision == "reject"
    plain = run_experiment(wf, ["500"], store=store, progress=False)
    assert plain.reused == 1 and plain.run_ids == held.run_ids  # still waiting, kept


def test_an_approve_that_is_not_callable_fails_before_any_run() -> None:
    wf, model = shop()
    with pytest.raises(TypeError, match=r"`approve` takes `fn\(pending_call\) -> Decision`"):
        wf.map(["500"], approve=True, store=False, progress=False)  # type: ignore[arg-type]
    assert model.requests == []


def test_a_ray_worker_applies_approve_to_its_runs() -> None:
    """The worker class Ray runs (driven here without Ray, whose start-up is slow) gets
    `approve` with the workflows and decides its runs' gated calls with it."""
    wf, _ = shop()
    thresholds = gc.get_threshold()
    try:
        worker = RayWorker(dumps_workflows({"base": wf}), None, lambda p: Decision.reject("no"))
    finally:
        gc.set_threshold(*thresholds)  # the worker tunes its own process's collector
    run = Run.from_json(asyncio.run(worker.run("base", "500", "r1")))
    call = run.turns[0].tool_calls[0]
    assert (run.status, call.decision, call.ok) == ("finished", "reject", False)
