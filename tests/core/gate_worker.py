"""A process that starts or resumes a gated run in a `SqliteRunStore`, for test_gates.py.

python gate_worker.py start DB                     # a run that stops at the gate: waiting
python gate_worker.py resume DB RUN_ID DECISIONS   # DECISIONS: {call_id: Decision as JSON}

Each prints one JSON line: the run's id, status, pending call ids, output, its turns' calls,
and how many model calls and tool runs this process made.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from thena_nb import Agent, Decision, Workflow, loop, tool, until_answered
from thena_nb.core.records.model import ModelRequest
from thena_nb.core.runs.run import Run
from thena_nb.models import FunctionModel, reply
from thena_nb.store import SqliteRunStore

FIRST_CALLS = [
    ("pay", {"amount": 500}),
    ("pay", {"amount": 20}),
    ("refund", {"amount": 7}),
    ("note", {"text": "paid"}),
]
"""The model's first turn: four calls; `pay(500)` and `refund(7)` are gated."""


def shop(ran: list[tuple[str, Any]]) -> Workflow:
    """The workflow of the gate tests: `pay` over 100 and every `refund` wait for a decision;
    each tool that runs appends `(name, argument)` to `ran`."""

    @tool(gate=lambda call: call.arguments["amount"] > 100)
    def pay(amount: int) -> str:
        """Pay an amount."""
        ran.append(("pay", amount))
        return f"paid {amount}"

    @tool(gate=True)
    def refund(amount: int) -> str:
        """Refund an amount."""
        ran.append(("refund", amount))
        return f"refunded {amount}"

    @tool
    def note(text: str) -> str:
        """Write a note."""
        ran.append(("note", text))
        return "noted"

    def clerk(request: ModelRequest) -> Any:
        if request.messages[-1].role == "tool":
            return "All done."
        return reply.calls(FIRST_CALLS)

    agent = Agent("Clerk", model=FunctionModel(clerk), tools=[pay, refund, note])
    return Workflow("shop", [loop(steps=[agent], until=until_answered, max_iterations=4)])


def model_calls(wf: Workflow) -> int:
    return len(wf.steps[0].steps[0].model.requests)


def summary(run: Run, wf: Workflow, ran: list[tuple[str, Any]]) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "status": run.status,
        "pending": [p.call.id for p in run.pending],
        "output": run.output,
        "calls": [
            [c.model_dump(mode="json", exclude={"traceback"}) for c in t.tool_calls]
            for t in run.turns
        ],
        "replayed": [t.replayed for t in run.turns],
        "model_calls": model_calls(wf),
        "ran": ran,
    }


def main(mode: str, db: str, *args: str) -> None:
    ran: list[tuple[str, Any]] = []
    wf = shop(ran)
    with SqliteRunStore.from_path(db) as store:
        if mode == "start":
            run = wf.run("settle the account", store=store)
        else:
            run_id, decisions = args
            given = {k: Decision.model_validate(v) for k, v in json.loads(decisions).items()}
            run = wf.resume(run_id, store=store, decisions=given)
    print(json.dumps(summary(run, wf, ran)), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
