"""`Session`: step, run, stop, breakpoints, events — the one driver of every run."""

from __future__ import annotations

import asyncio

import pytest
from helpers import HeldModel, add_call, calc, fail_call

from thena_nb import Agent, Event, Workflow, loop, parallel, until_answered
from thena_nb.models import FunctionModel, ScriptedModel

pytestmark = pytest.mark.anyio


def looped(replies: list[object], **kw: object) -> Workflow:
    return Workflow("w", [loop(steps=[calc(replies)], until=until_answered, **kw)])  # type: ignore[arg-type]


async def test_a_new_session_does_nothing_until_the_first_step() -> None:
    model = ScriptedModel(["x"])
    s = Workflow("w", [Agent("A", model=model)]).session("go")
    await asyncio.sleep(0.01)
    assert model.requests == [] and s.task is None
    assert s.result.status == "running" and s.result.turns == []


async def test_step_returns_each_turn_then_none() -> None:
    s = looped([add_call(), add_call(), "done"]).session("go")
    turns = []
    while (turn := await s.step()) is not None:
        turns.append(turn.index)
        assert s.paused or s.done
    assert turns == [0, 1, 2]
    assert s.done and s.result.status == "finished"
    assert await s.step() is None


async def test_step_returns_after_the_checks_that_follow_the_turn() -> None:
    s = looped([fail_call(), fail_call(), "unused"], max_fails=2).session("go")
    await s.step()
    assert s.result.loops[0].stop_reason is None
    await s.step()
    assert s.done
    assert s.result.loops[0].stop_reason == "fails"


async def test_a_parallel_block_steps_one_branch_turn_at_a_time() -> None:
    a = Agent("A", model=ScriptedModel(["a"]))
    b = Agent("B", model=ScriptedModel(["b"]))
    c = Agent("C", model=ScriptedModel(["c"]))
    s = Workflow("w", [parallel([a, b]), c]).session("go")
    first = await s.step()
    assert first is not None and (first.agent, first.branch) == ("A", 0)
    assert s.result.turns == []  # branch turns join the run when the block merges
    second = await s.step()
    assert second is not None and (second.agent, second.branch) == ("B", 1)
    assert [t.agent for t in s.result.turns] == ["A", "B"]
    third = await s.step()
    assert third is not None and third.agent == "C"


async def test_stop_while_paused_makes_no_further_model_call() -> None:
    model = ScriptedModel([add_call()] * 5)
    wf = Workflow(
        "w", [loop(steps=[Agent("A", model=model, tools=calc([]).tools)], until=until_answered)]
    )
    s = wf.session("go")
    await s.step()
    s.stop()
    assert s.result.status == "stopped"
    assert s.result.loops[0].stop_reason == "stop"
    run = await s.run()
    assert run.status == "stopped" and s.done
    assert len(model.requests) == 1 and len(run.turns) == 1


async def test_stop_before_start() -> None:
    s = looped(["x"]).session("go")
    s.stop()
    assert s.done and s.result.status == "stopped"
    assert await s.step() is None


async def test_stop_while_running_cancels_the_model_call_in_flight() -> None:
    model = HeldModel([add_call()] * 10, hold_at=2)
    agent = Agent("A", model=model, tools=calc([]).tools)
    s = Workflow("w", [loop(steps=[agent], until=until_answered)]).session("go")
    task = asyncio.ensure_future(s.run())
    await asyncio.wait_for(model.held.wait(), 10)  # the second model call is under way
    s.stop()
    run = await asyncio.wait_for(task, 10)
    assert run.status == "stopped"
    assert model.calls == 2 and len(run.turns) == 1
    assert run.loops[0].stop_reason == "stop"


async def test_stop_mid_parallel_keeps_the_branch_turns_that_finished() -> None:
    """A stop while a parallel block runs cancels the model calls in flight; the branch
    turns that finished before it are kept (S28), in declaration order. (B's call starts
    once A's turn is done, and the stop comes while it is in flight: events, no clock.)"""
    a_done, b_in_flight = asyncio.Event(), asyncio.Event()

    def a_finished(ctx: object) -> None:
        a_done.set()  # a step after A's turn, in A's branch: that turn is done

    async def b_answers(request: object) -> str:
        await a_done.wait()
        b_in_flight.set()
        await asyncio.Event().wait()  # until the stop cancels it
        return "never"

    a = loop(steps=[Agent("A", model=ScriptedModel(["a"])), a_finished], until=lambda ctx: True)
    b = Agent("B", model=FunctionModel(b_answers))
    after = Agent("After", model=ScriptedModel(["never"]))
    s = Workflow("w", [parallel([a, b]), after]).session("go")
    task = asyncio.ensure_future(s.run())
    await asyncio.wait_for(b_in_flight.wait(), 10)
    s.stop()
    run = await asyncio.wait_for(task, 10)
    assert run.status == "stopped"
    assert [t.agent for t in run.turns] == ["A"]


async def test_ctx_stop_from_a_tool() -> None:
    from thena_nb import Context, tool

    @tool
    def give_up(ctx: Context) -> str:
        """Stop the run."""
        ctx.stop()
        return "stopping"

    model = ScriptedModel(
        [
            add_call(),
            __import__("thena_nb.models", fromlist=["reply"]).reply.tool("give_up"),
            "never",
        ]
    )
    agent = Agent("A", model=model, tools=[*calc([]).tools, give_up])
    run = await Workflow("w", [loop(steps=[agent], until=until_answered)]).arun("go")
    assert run.status == "stopped" and len(run.turns) == 2
    assert run.turns[1].tool_calls[0].result == "stopping"
    assert run.loops[0].stop_reason == "stop"


async def test_breakpoints_pause_a_running_session() -> None:
    s = looped([add_call(), fail_call(), add_call(), "done"]).session("go")
    s.breakpoints.append(lambda turn: turn.info.tool_error)
    run = await s.run()
    assert not s.done and len(run.turns) == 2
    assert s.breakpoint_hit is not None and s.breakpoint_hit.index == 1
    run = await s.run()
    assert s.done and len(run.turns) == 4 and run.status == "finished"


async def test_events_in_order() -> None:
    events: list[Event] = []
    s = looped([add_call(), "done"]).session("go")
    s.subscribe(events.append)
    await s.run()
    kinds = [e.kind for e in events]
    assert kinds == [
        "turn_started",
        "tool_started",
        "tool_finished",
        "turn_finished",
        "turn_started",
        "turn_finished",
        "loop_stopped",
        "run_finished",
    ]
    assert events[3].turn is not None and events[3].turn.index == 0
    assert events[6].stop_reason == "until" and events[6].path == "w/0.loop"


async def test_unsubscribe() -> None:
    events: list[Event] = []
    s = looped(["done"]).session("go")
    off = s.subscribe(events.append)
    off()
    await s.run()
    assert events == []


async def test_result_is_readable_while_paused() -> None:
    s = looped([add_call(), add_call(), "done"]).session("go")
    await s.step()
    run = s.result
    assert run.status == "running" and len(run.turns) == 1
    assert run.usage.model_calls == 1 and run.usage.tool_calls == 1
    assert repr(s) == "Session('w', paused, turns=1)"


async def test_a_failing_step_raises_from_step_and_keeps_the_run() -> None:
    s = looped([add_call()]).session("go")
    await s.step()
    from thena_nb.core.records.errors import ScriptExhaustedError

    with pytest.raises(ScriptExhaustedError) as info:
        await s.step()
    assert info.value.run is s.result  # type: ignore[attr-defined]
    assert s.done and s.result.status == "failed"


async def test_open_loops_shows_each_running_loop_outermost_first() -> None:
    """`Session.open_loops` is a public snapshot: path, iteration, limits and the streak."""
    inner = loop(steps=[calc([fail_call(), "done"])], until=until_answered)
    wf = Workflow("w", [loop(steps=[inner], until=until_answered, max_iterations=3, max_fails=4)])
    s = wf.session("go", store=False)
    assert s.open_loops == []
    await s.step()
    outer, nested = s.open_loops
    assert (outer.path, outer.iteration, outer.max_iterations, outer.max_fails) == (
        "w/0.loop",
        1,
        3,
        4,
    )
    # Paused before the next model call: the inner loop's second iteration is about to run.
    assert (nested.path, nested.iteration, nested.consecutive_fails) == ("w/0.loop/0.loop", 2, 1)
    await s.run()
    assert s.done and s.open_loops == []


async def test_a_session_can_pause_before_a_turns_tools() -> None:
    """The second pause point: after the model call, before any tool of the turn runs."""
    ran: list[int] = []
    model = ScriptedModel([add_call(2, 3), "done"])
    wf = Workflow("w", [loop(steps=[calc([])], until=until_answered)])
    agent = wf.steps[0].steps[0]
    agent.model = model
    s = wf.session("go", store=False)
    s.subscribe(lambda e: ran.append(1) if e.kind == "tool_finished" else None)
    s.pause_before_tools = True
    assert await s.step() is None  # the model was called; the tools wait
    assert s.paused and s.paused_at == "tools"
    assert len(model.requests) == 1 and ran == [] and s.result.turns == []
    turn = await s.step()
    assert turn is not None and turn.tool_calls[0].result == "5" and ran == [1]
    assert s.paused_at == "model"
    assert (await s.run()).output == "done"
    assert s.paused_at is None


class GatedModel:
    """A scripted model whose first call waits for `release`: a test pauses while it answers."""

    def __init__(self, replies: list[object]) -> None:
        self.scripted = ScriptedModel(replies)  # type: ignore[arg-type]
        self.name = self.scripted.name
        self.answering = asyncio.Event()
        self.release = asyncio.Event()

    async def respond(self, request: object) -> object:
        self.answering.set()
        await self.release.wait()
        return await self.scripted.respond(request)  # type: ignore[arg-type]


async def test_pause_while_the_model_answers_pauses_before_that_turns_tools() -> None:
    """A pause asked during a model call takes effect at the next pause point, which is
    before that turn's tools: none runs until the session goes on."""
    ran: list[str] = []
    model = GatedModel([add_call(2, 3), "done"])
    wf = Workflow("w", [loop(steps=[calc([])], until=until_answered)])
    wf.steps[0].steps[0].model = model  # type: ignore[attr-defined]
    s = wf.session("go", store=False)
    s.subscribe(lambda e: ran.append(e.kind) if e.kind == "tool_finished" else None)
    running = asyncio.ensure_future(s.run())
    await model.answering.wait()
    s.pause()
    model.release.set()
    await running
    assert s.paused and s.paused_at == "tools"
    assert ran == [] and s.result.turns == []
    assert (await s.run()).output == "done"
    assert ran == ["tool_finished"] and [t.tool_calls[0].result for t in s.result.turns[:1]] == [
        "5"
    ]


async def test_a_turn_with_no_calls_does_not_pause_before_tools() -> None:
    s = Workflow("w", [Agent("A", model=ScriptedModel(["hi"]))]).session("go", store=False)
    s.pause_before_tools = True
    turn = await s.step()
    assert turn is not None and turn.info.response == "hi"
