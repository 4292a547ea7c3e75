"""ScriptedModel and FunctionModel: per-run scripts, stable call ids, reply helpers."""

from __future__ import annotations

import asyncio

import pytest

from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.models import FunctionModel, ModelRequest, Reply, ScriptedModel, reply


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
    from thena_nb.core.records.types import ToolCall
    from thena_nb.models import Reply

    given = Reply(tool_calls=[ToolCall(id="toolu_1", name="add", arguments={"a": 1, "b": 1})])
    run = workflow(ScriptedModel([given, "ok"])).run("x", store=False)
    assert run.turns[0].tool_calls[0].id == "toolu_1"


@pytest.mark.anyio
async def test_cancelling_arun_cancels_the_run() -> None:
    """Cancelled while its third model call is in flight (an event says when, not the
    clock): the run is stopped with the two turns that finished, and makes no more calls."""
    scripted = ScriptedModel([reply.tool("add", a=1, b=1)] * 20)
    third_call, calls = asyncio.Event(), []

    async def answer(request: ModelRequest) -> Reply:
        calls.append(request)
        if len(calls) == 3:
            third_call.set()
            await asyncio.Event().wait()  # until cancelled
        return await scripted.respond(request)

    wf = workflow(FunctionModel(answer))
    seen: list[object] = []

    async def call() -> None:
        try:
            await wf.arun("x", store=False)
        except asyncio.CancelledError as exc:
            seen.append(exc.run)  # type: ignore[attr-defined]
            raise

    task = asyncio.ensure_future(call())
    await asyncio.wait_for(third_call.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
    for _ in range(10):
        await asyncio.sleep(0)  # (room for a call the cancel failed to stop)
    assert len(calls) == 3
    (run,) = seen
    assert run.status == "stopped" and len(run.turns) == 2  # type: ignore[attr-defined]
