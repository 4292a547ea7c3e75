"""ScriptedModel and FunctionModel: per-run scripts, stable call ids, reply helpers."""

from __future__ import annotations

import asyncio

import pytest

from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.models import FunctionModel, ScriptedModel, reply


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def workflow(model: object) -> Workflow:
    agent = Agent("A", model=model, tools=[add])  # type: ignore[arg-type]
    return Workflow("w", [loop(steps=[agent], until=until_answered)])


@pytest.mark.anyio
async def test_many_concurrent_runs_each_follow_their_own_script() -> None:
    model = ScriptedModel([reply.tool("add", a=1, b=2), "three"], delay=0.01)
    wf = workflow(model)
    runs = await asyncio.gather(*(wf.arun(f"run {i}", store=False) for i in range(150)))
    assert {len(r.turns) for r in runs} == {2}
    assert {r.output for r in runs} == {"three"}


def test_call_ids_are_the_same_in_every_run() -> None:
    made = reply.tool("add", a=1, b=2)
    assert made.tool_calls[0].id == ""
    model = FunctionModel(lambda r: reply.tool("add", a=1, b=2) if len(r.messages) == 1 else "done")
    wf = workflow(model)
    first, second = wf.run("x", store=False), wf.run("x", store=False)
    assert first.turns[0].tool_calls[0].id == second.turns[0].tool_calls[0].id == "call_1_0"
    assert first.turns[1].request_key == second.turns[1].request_key


def test_explicit_ids_are_kept() -> None:
    from thena_nb.core.types import ToolCall
    from thena_nb.models import Reply

    given = Reply(tool_calls=[ToolCall(id="toolu_1", name="add", arguments={"a": 1, "b": 1})])
    run = workflow(ScriptedModel([given, "ok"])).run("x", store=False)
    assert run.turns[0].tool_calls[0].id == "toolu_1"


@pytest.mark.anyio
async def test_cancelling_arun_cancels_the_run() -> None:
    model = ScriptedModel([reply.tool("add", a=1, b=1)] * 20, delay=0.02)
    wf = workflow(model)
    seen: list[object] = []

    async def call() -> None:
        try:
            await wf.arun("x", store=False)
        except asyncio.CancelledError as exc:
            seen.append(exc.run)  # type: ignore[attr-defined]
            raise

    task = asyncio.ensure_future(call())
    await asyncio.sleep(0.07)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    calls = len(model.requests)
    await asyncio.sleep(0.1)
    assert len(model.requests) == calls
    (run,) = seen
    assert run.status == "stopped" and len(run.turns) >= 2  # type: ignore[attr-defined]
