"""Experiments with tool gates: a run that reaches a gate is a `waiting` row."""

from __future__ import annotations

from typing import Any

from thena_nb import Agent, Decision, Workflow, loop, tool, until_answered
from thena_nb.experiments import run_experiment
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
