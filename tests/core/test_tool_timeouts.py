"""Tool time limits (`@tool(timeout=...)`, `Workflow(tool_timeout=...)`) and `Session.stop()`
cutting tool calls short: async tools are cancelled, sync tools' threads abandoned."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.core.parts.tools import run_tool_call
from thena_nb.core.records.errors import WorkflowDefinitionError
from thena_nb.core.records.types import ToolCall
from thena_nb.models import ScriptedModel, reply

pytestmark = pytest.mark.anyio

HINT = "The limit is the tool's own `@tool(timeout=0.05)`: raise it there if the tool needs longer."
WORKFLOW_HINT = (
    "The limit is the workflow's `Workflow(tool_timeout=0.05)`: raise it there if the tool "
    "needs longer."
)


def one_call_workflow(t: object, **options: object) -> Workflow:
    model = ScriptedModel([reply.tool(getattr(t, "name", ""), s=5), "gave up"])
    agent = Agent("A", model=model, tools=[t])
    return Workflow("w", [loop(steps=[agent], until=until_answered)], **options)  # type: ignore[arg-type]


async def test_an_async_tool_past_its_timeout_is_a_failed_call_that_says_so() -> None:
    @tool(timeout=0.05)
    async def wait(s: float) -> str:
        """Waits."""
        await asyncio.sleep(s)
        return "done"

    t0 = time.perf_counter()
    run = await one_call_workflow(wait).arun("go", store=False)
    assert time.perf_counter() - t0 < 2
    (call,) = run.turns[0].tool_calls
    assert call.ok is False and call.result is None
    assert call.error == (
        "Error: tool 'wait' {\"s\": 5} timed out after 0.05 s and was cancelled. " + HINT
    )
    assert run.turns[0].info.tool_error is True and run.output == "gave up"
    tool_message = next(m for m in run.history if m.role == "tool")
    assert tool_message.is_error and tool_message.content == call.error  # the model is told


async def test_a_sync_tool_past_its_timeout_runs_in_a_thread_that_is_abandoned() -> None:
    release = threading.Event()
    threads: list[str] = []

    @tool(timeout=0.05)
    def block(s: float) -> str:
        """Blocks until released."""
        threads.append(threading.current_thread().name)
        release.wait(s)
        return "late"

    run = await one_call_workflow(block).arun("go", store=False)
    release.set()
    (call,) = run.turns[0].tool_calls
    assert call.error == (
        "Error: tool 'block' {\"s\": 5} timed out after 0.05 s; its thread was abandoned and "
        "may still be running. " + HINT
    )
    assert threads == ["thena_nb-tool-block"] and run.status == "finished"


async def test_a_sync_tool_without_a_timeout_still_runs_inline() -> None:
    """The thread is only for a tool that has a limit (or is `blocking`)."""
    main = threading.get_ident()

    @tool
    def where() -> str:
        """Which thread."""
        return "inline" if threading.get_ident() == main else "thread"

    done = await run_tool_call(ToolCall(id="1", name="where"), {"where": where}, None)
    assert done.result == "inline"
    timed = await run_tool_call(ToolCall(id="1", name="where"), {"where": where}, None, timeout=5)
    assert timed.result == "thread"


async def test_the_workflow_tool_timeout_applies_to_tools_without_their_own() -> None:
    @tool
    async def wait(s: float) -> str:
        """Waits."""
        await asyncio.sleep(s)
        return "done"

    run = await one_call_workflow(wait, tool_timeout=0.05).arun("go", store=False)
    error = run.turns[0].tool_calls[0].error or ""
    assert "timed out after 0.05 s" in error
    assert error.endswith(WORKFLOW_HINT)  # the limit that applied, not `@tool(timeout=...)`

    @tool(name="wait", timeout=10)
    async def patient(s: float) -> str:
        """Waits, with a limit of its own."""
        await asyncio.sleep(s / 100)
        return "done"

    run = await one_call_workflow(patient, tool_timeout=0.01).arun("go", store=False)
    assert run.turns[0].tool_calls[0].result == "done"  # the tool's own limit wins


async def test_a_timeout_error_the_tool_raises_itself_is_the_tools_own() -> None:
    @tool(timeout=5)
    async def flaky(s: float) -> str:
        """Raises its own timeout."""
        raise TimeoutError("upstream took too long")

    run = await one_call_workflow(flaky).arun("go", store=False)
    assert run.turns[0].tool_calls[0].error == (
        "Error: tool 'flaky' {\"s\": 5} raised TimeoutError: upstream took too long"
    )


async def test_a_timed_out_call_counts_toward_max_fails() -> None:
    @tool(timeout=0.01)
    async def wait(s: float) -> str:
        """Waits."""
        await asyncio.sleep(s)
        return "done"

    model = ScriptedModel([reply.tool("wait", s=5)] * 3)
    agent = Agent("A", model=model, tools=[wait])
    wf = Workflow("w", [loop(steps=[agent], until=until_answered, max_fails=2)])
    run = await wf.arun("go", store=False)
    assert run.loops[0].stop_reason == "fails" and len(run.turns) == 2


@pytest.mark.parametrize("bad", [0, -1, "5", True, float("nan")])
def test_a_bad_timeout_is_refused_with_a_clear_error(bad: object) -> None:
    with pytest.raises(ValueError, match=r"tool 'f': `timeout` must be a positive number"):
        tool(lambda: 1, name="f", timeout=bad)  # type: ignore[arg-type]
    with pytest.raises(WorkflowDefinitionError, match=r"workflow 'w': `tool_timeout` must be"):
        Workflow("w", [], tool_timeout=bad)  # type: ignore[arg-type]


def test_tool_timeout_is_a_changeable_workflow_field() -> None:
    from thena_nb.core.parts.changes import apply_changes

    wf = Workflow("w", [Agent("A", model=ScriptedModel(["hi"]))], tool_timeout=3)
    assert apply_changes(wf, {}).tool_timeout == 3
    assert apply_changes(wf, {"w": {"tool_timeout": 9}}).tool_timeout == 9


async def test_stop_abandons_a_blocking_sync_tools_thread_and_says_so() -> None:
    entered, release = threading.Event(), threading.Event()

    @tool(blocking=True)
    def block() -> str:
        """Blocks until released."""
        entered.set()
        release.wait(10)
        return "late"

    model = ScriptedModel([reply.tool("block"), "never"])
    wf = Workflow("w", [loop(steps=[Agent("A", model=model, tools=[block])], until=until_answered)])
    s = wf.session("go", store=False)
    task = asyncio.ensure_future(s.run())
    await asyncio.to_thread(entered.wait, 2)
    t0 = time.perf_counter()
    s.stop()
    run = await asyncio.wait_for(task, 2)
    assert time.perf_counter() - t0 < 1  # not waiting for the thread
    release.set()
    (call,) = run.turns[0].tool_calls
    assert call.error == (
        "Error: tool 'block' {} was stopped while it ran (the run was stopped); its thread was "
        "abandoned and may still be running."
    )
    assert run.status == "stopped" and run.loops[0].stop_reason == "stop"
    assert run.error == f"stopped while tool 'block' ({call.id}) was left running in its thread"
    assert len(model.requests) == 1


async def test_stop_cuts_a_turns_calls_short_and_runs_none_after() -> None:
    inside = asyncio.Event()
    ran: list[str] = []

    @tool
    async def slow(name: str) -> str:
        """Waits for ever."""
        ran.append(name)
        inside.set()
        await asyncio.sleep(60)
        return name

    @tool
    def quick(name: str) -> str:
        """Answers at once."""
        ran.append(name)
        return name

    turn = reply.calls(
        [("quick", {"name": "a"}), ("slow", {"name": "b"}), ("quick", {"name": "c"})]
    )
    agent = Agent("A", model=ScriptedModel([turn, "never"]), tools=[slow, quick])
    s = Workflow("w", [agent]).session("go", store=False)
    task = asyncio.ensure_future(s.run())
    await asyncio.wait_for(inside.wait(), 2)
    s.stop()
    run = await asyncio.wait_for(task, 2)
    a, b, c = run.turns[0].tool_calls
    assert ran == ["a", "b"] and a.result == "a"
    assert b.ok is False and "was stopped while it ran" in (b.error or "")
    assert c.error == "Error: tool 'quick' was not run: the run was stopped before it ran"
    assert run.status == "stopped"
    assert [m.tool_call_id for m in run.history if m.role == "tool"] == [a.id, b.id, c.id]


async def test_stop_during_parallel_tools_keeps_the_calls_that_finished() -> None:
    inside = asyncio.Event()

    @tool
    async def wait(s: float) -> str:
        """Waits."""
        if s > 1:
            inside.set()
        await asyncio.sleep(s)
        return f"waited {s}"

    turn = reply.calls([("wait", {"s": 0}), ("wait", {"s": 60})])
    agent = Agent("A", model=ScriptedModel([turn]), tools=[wait], parallel_tools=True)
    s = Workflow("w", [agent]).session("go", store=False)
    task = asyncio.ensure_future(s.run())
    await asyncio.wait_for(inside.wait(), 2)
    await asyncio.sleep(0.01)  # the quick call finishes
    s.stop()
    run = await asyncio.wait_for(task, 2)
    quick, slow = run.turns[0].tool_calls
    assert quick.result == "waited 0.0"
    assert slow.ok is False and "was stopped while it ran" in (slow.error or "")
    assert run.status == "stopped"


async def test_a_tool_that_stops_its_own_session_is_not_cancelled() -> None:
    sessions: list[object] = []

    @tool
    async def halt() -> str:
        """Stops the run from inside."""
        sessions[0].stop()  # type: ignore[attr-defined]
        await asyncio.sleep(0)
        return "asked to stop"

    model = ScriptedModel([reply.tool("halt"), "never"])
    agent = Agent("A", model=model, tools=[halt])
    session = Workflow("w", [loop(steps=[agent], until=until_answered)]).session("go", store=False)
    sessions.append(session)
    run = await asyncio.wait_for(session.run(), 2)
    assert run.turns[0].tool_calls[0].result == "asked to stop"  # it ran to its end
    assert run.status == "stopped" and len(model.requests) == 1
