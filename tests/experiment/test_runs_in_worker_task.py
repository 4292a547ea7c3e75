"""An experiment's worker runs each run in its own task (`Session._run_to_end`): a run that
never waits goes from start to summary in one go, no task and no finished run piled up."""

from __future__ import annotations

import asyncio

import pytest

from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.experiments import run_experiment
from thena_nb.models import FunctionModel, reply

TASKS: list[int] = []


@tool
def where(q: str) -> str:
    """Note the task this call runs in."""
    TASKS.append(id(asyncio.current_task()))
    return q


def _workflow() -> Workflow:
    def answer(request: object) -> object:
        done = sum(1 for m in request.messages if m.role == "tool")  # type: ignore[attr-defined]
        return reply.tool("where", q="x") if done < 2 else "done"

    agent = Agent("A", model=FunctionModel(answer), tools=[where])
    return Workflow("w", [loop(steps=[agent], until=until_answered)])


def test_runs_that_never_wait_run_one_after_another_in_the_workers_task() -> None:
    TASKS.clear()
    exp = run_experiment(_workflow(), [f"q{i}" for i in range(40)], concurrency=10, progress=False)
    assert [r.status for r in exp.runs] == ["finished"] * 40
    assert len(TASKS) == 80
    # One task ran them all (a session task each would make 40).
    assert len(set(TASKS)) == 1


def test_run_to_end_refuses_a_started_or_pausing_session() -> None:
    wf = _workflow()

    async def main() -> None:
        s = wf.session("go", at_gate="wait")
        run = await s._run_to_end()
        assert run.status == "finished" and len(run.turns) == 3
        with pytest.raises(RuntimeError, match="new session"):
            await s._run_to_end()
        with pytest.raises(RuntimeError, match="cannot pause"):
            await wf.session("go")._run_to_end()  # at_gate="pause"

    asyncio.run(main())
