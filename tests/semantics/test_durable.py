"""S25–S28: durable steps — retries, budgets, tool order, turns recorded as they finish."""

from __future__ import annotations

import asyncio

import pytest
from helpers import HeldModel, add_call, calc

from thena_nb import Agent, Budget, Workflow, loop, parallel, tool, until_answered
from thena_nb.models import ModelError, RetryPolicy, ScriptedModel, TransientModelError, reply

FAST = RetryPolicy(initial_delay=0.001, max_delay=0.002, jitter=False)


def test_s25_transient_errors_are_retried_and_earlier_turns_kept() -> None:
    """S25: a transient failure is retried with backoff; earlier turns are not redone."""
    ran: list[int] = []

    @tool
    def count(n: int) -> int:
        """Record a call."""
        ran.append(n)
        return n

    model = ScriptedModel(
        [
            reply.tool("count", n=1),
            reply.error(TransientModelError("overloaded")),
            reply.error(TransientModelError("rate limited", retry_after=0.001)),
            "done",
        ]
    )
    agent = Agent("A", model=model, tools=[count])
    run = Workflow("w", [loop(steps=[agent], until=until_answered)], retry=FAST).run("x")
    assert run.status == "finished"
    assert [t.attempts for t in run.turns] == [1, 3]
    assert ran == [1]
    assert run.usage.model_calls == 4
    assert len(model.requests) == 4
    assert model.requests[1].messages == model.requests[3].messages


def test_s25_after_the_last_retry_the_run_fails_and_keeps_its_turns() -> None:
    """S25: after max_retries the error reaches the caller with every finished turn."""
    err = TransientModelError("overloaded")
    model = ScriptedModel([add_call(), *[reply.error(err)] * 3])
    agent = Agent("A", model=model, tools=calc([]).tools)
    wf = Workflow(
        "w",
        [loop(steps=[agent], until=until_answered)],
        retry=FAST.model_copy(update={"max_retries": 2}),
    )
    with pytest.raises(TransientModelError) as info:
        wf.run("x")
    run = info.value.run  # type: ignore[attr-defined]
    assert run.status == "failed" and len(run.turns) == 1
    assert run.usage.model_calls == 4
    assert run.loops[0].stop_reason is None and run.loops[0].error
    assert any("turn 1 of agent 'A'" in n for n in info.value.__notes__)


def test_s25_other_model_errors_are_final() -> None:
    """S25: an error that is not transient is not retried."""
    model = ScriptedModel([reply.error(ModelError("bad request")), "never"])
    with pytest.raises(ModelError):
        Workflow("w", [Agent("A", model=model)], retry=FAST).run("x")
    assert len(model.requests) == 1


def test_s25_backoff_schedule() -> None:
    """S25: the n-th retry waits min(initial * 2**(n-1), max), or retry_after when longer."""
    policy = RetryPolicy(initial_delay=0.5, max_delay=8.0, jitter=False)
    assert [policy.delay(n) for n in (1, 2, 3, 5, 6)] == [0.5, 1.0, 2.0, 8.0, 8.0]
    assert policy.delay(1, retry_after=3.0) == 3.0
    assert policy.delay(3, retry_after=1.0) == 2.0
    jittered = RetryPolicy(initial_delay=1.0)
    assert jittered.delay(1, rand=0.0) == 0.5 and jittered.delay(1, rand=1.0) == 1.0


def test_s25_a_retry_in_one_branch_does_not_touch_its_sibling() -> None:
    """S25: a retry in one parallel branch leaves the sibling's turn alone."""
    a = Agent("A", model=ScriptedModel([reply.error(TransientModelError("busy")), "a"]))
    mb = ScriptedModel(["b"])
    run = Workflow("w", [parallel([a, Agent("B", model=mb)])], retry=FAST).run("x")
    assert [t.attempts for t in run.turns] == [2, 1]
    assert len(mb.requests) == 1


def test_s26_budget_stops_the_run_and_keeps_everything() -> None:
    """S26: a spent budget records `budget` on the loop and ends the run."""
    agent = calc([add_call()] * 5)
    wf = Workflow(
        "w", [loop(steps=[agent], until=until_answered)], budget=Budget(max_model_calls=2)
    )
    run = wf.run("x")
    assert run.status == "budget"
    assert len(run.turns) == 2 and run.loops[0].iterations == 2
    assert run.loops[0].stop_reason == "budget"
    assert "max_model_calls" in (run.error or "")


def test_s26_token_budget_counts_input_plus_output() -> None:
    """S26: max_tokens counts input plus output tokens; the turn reaching it finishes."""
    r = reply.tool("add", a=1, b=1, input_tokens=60, output_tokens=50)
    wf = Workflow(
        "w", [loop(steps=[calc([r] * 5)], until=until_answered)], budget=Budget(max_tokens=200)
    )
    run = wf.run("x")
    assert len(run.turns) == 2 and run.usage.total_tokens == 220
    assert run.usage.tool_calls == 2


def test_s26_budget_ends_every_enclosing_loop_and_skips_later_steps() -> None:
    """S26: every enclosing loop records `budget` and the steps after do not run."""
    after: list[int] = []
    inner = loop(steps=[calc([add_call()] * 9)], until=until_answered)
    outer = loop(steps=[inner], until=until_answered)
    wf = Workflow("w", [outer, lambda ctx: after.append(1)], budget=Budget(max_tool_calls=3))
    run = wf.run("x")
    assert [n.stop_reason for n in run.loops] == ["budget", "budget"]
    assert after == [] and run.status == "budget"


def test_s27_tools_run_in_order_and_results_return_in_order() -> None:
    """S27: tools of one turn run in the order the model gave; results go back in that order."""
    order: list[str] = []

    @tool
    async def slow(name: str) -> str:
        """Slow."""
        order.append(f"start {name}")
        await asyncio.sleep(0.02)
        order.append(f"end {name}")
        return name

    @tool
    def quick(name: str) -> str:
        """Quick."""
        order.append(f"run {name}")
        return name

    turn = reply.calls([("slow", {"name": "1"}), ("quick", {"name": "2"}), ("slow", {"name": "3"})])
    run = Workflow("w", [Agent("A", model=ScriptedModel([turn]), tools=[slow, quick])]).run("x")
    assert order == ["start 1", "end 1", "run 2", "start 3", "end 3"]
    assert [m.content for m in run.history if m.role == "tool"] == ["1", "2", "3"]


def test_s27_parallel_tools_run_concurrently_but_answer_in_call_order() -> None:
    """S27: with parallel_tools the calls overlap, and results still go back in call order."""
    order: list[str] = []

    @tool
    async def wait(name: str, seconds: float) -> str:
        """Wait."""
        order.append(f"start {name}")
        await asyncio.sleep(seconds)
        order.append(f"end {name}")
        return name

    turn = reply.calls(
        [("wait", {"name": "a", "seconds": 0.05}), ("wait", {"name": "b", "seconds": 0.0})]
    )
    agent = Agent("A", model=ScriptedModel([turn]), tools=[wait], parallel_tools=True)
    run = Workflow("w", [agent]).run("x")
    assert order == ["start a", "start b", "end b", "end a"]
    assert [m.content for m in run.history if m.role == "tool"] == ["a", "b"]
    assert [c.name for c in run.turns[0].tool_calls] == ["wait", "wait"]


@pytest.mark.anyio
async def test_s28_a_finished_turn_is_recorded_before_the_next_starts() -> None:
    """S28: every finished turn is in the run when the next model call starts."""
    seen: list[int] = []
    holder: dict[str, object] = {}

    async def respond(request: object) -> str:
        session = holder["s"]
        seen.append(len(session.result.turns))  # type: ignore[attr-defined]
        return reply.tool("add", a=1, b=1) if len(seen) < 3 else "done"  # type: ignore[return-value]

    from thena_nb.models import FunctionModel

    agent = Agent("A", model=FunctionModel(respond), tools=calc([]).tools)
    s = Workflow("w", [loop(steps=[agent], until=until_answered)]).session("x")
    holder["s"] = s
    await s.run()
    assert seen == [0, 1, 2]


def test_s28_an_interrupted_run_keeps_every_finished_turn() -> None:
    """S28: an error in turn k leaves turns 0..k-1 on exc.run."""
    model = ScriptedModel([add_call(), add_call(), reply.error(RuntimeError("kernel died"))])
    agent = Agent("A", model=model, tools=calc([]).tools)
    with pytest.raises(RuntimeError) as info:
        Workflow("w", [loop(steps=[agent], until=until_answered)]).run("x")
    run = info.value.run  # type: ignore[attr-defined]
    assert [t.index for t in run.turns] == [0, 1]
    assert len([m for m in run.history if m.role == "tool"]) == 2


@pytest.mark.anyio
async def test_s28_a_cancelled_run_keeps_every_finished_turn() -> None:
    """S28: cancelling the task (a kernel interrupt) keeps every finished turn."""
    model = HeldModel([add_call()] * 5, hold_at=3)  # the third call is in flight
    agent = Agent("A", model=model, tools=calc([]).tools)
    s = Workflow("w", [loop(steps=[agent], until=until_answered)]).session("x")
    task = asyncio.ensure_future(s.run())
    await asyncio.wait_for(model.held.wait(), 10)
    assert s.task is not None
    s.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(s.result.turns) == 2
    assert s.result.status == "stopped" and s.done  # interrupted, not failed
    assert s.result.loops[0].stop_reason == "stop"
