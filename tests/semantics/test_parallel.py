"""S1–S6: parallel blocks."""

from __future__ import annotations

import asyncio

import pytest
from helpers import calc

from thena_nb import Agent, ParallelStep, Workflow, loop, parallel, until_answered
from thena_nb.models import FunctionModel, ScriptedModel, reply


def test_s1_parallel_returns_a_parallel_step() -> None:
    """S1: `parallel(steps)` returns a ParallelStep with kind "parallel" and its steps."""
    a = Agent("A", model=ScriptedModel(["a"]))
    b = Agent("B", model=ScriptedModel(["b"]))
    step = parallel([a, b])
    assert isinstance(step, ParallelStep)
    assert step.kind == "parallel"
    assert step.steps == (a, b)


def test_s2_branches_run_at_the_same_time() -> None:
    """S2: each branch's model call answers only once the other's has started, so the run
    finishes only if the two calls are in flight together (one after the other, the first
    would wait for ever: the bound turns that into a failure)."""
    started = {"A": asyncio.Event(), "B": asyncio.Event()}

    def waits_for(other: str, me: str) -> FunctionModel:
        async def respond(request: object) -> str:
            started[me].set()
            await asyncio.wait_for(started[other].wait(), 30)
            return me.lower()

        return FunctionModel(respond)

    a = Agent("A", model=waits_for("B", "A"))
    b = Agent("B", model=waits_for("A", "B"))
    run = Workflow("p", [parallel([a, b])]).run("go")
    assert run.status == "finished" and [t.info.response for t in run.turns] == ["a", "b"]


def test_s2_branches_share_the_state() -> None:
    """S2: branches run over the same state object."""
    from pydantic import BaseModel

    class S(BaseModel):
        a: str = ""
        b: str = ""

    a = Agent("A", model=ScriptedModel(["from a"]), output_field="a")
    b = Agent("B", model=ScriptedModel(["from b"]), output_field="b")
    run = Workflow("p", [parallel([a, b])], state=S).run("go")
    assert (run.state.a, run.state.b) == ("from a", "from b")


def test_s3_every_branch_reads_the_history_as_it_was_when_the_block_opened() -> None:
    """S3: no branch sees a sibling's turns."""
    first = Agent("First", model=ScriptedModel(["before"]))
    ma = ScriptedModel(["a"], delay=0.02)
    mb = ScriptedModel(["b"])
    wf = Workflow("p", [first, parallel([Agent("A", model=ma), Agent("B", model=mb)])])
    wf.run("go")
    seen_a = [m.content for m in ma.requests[0].messages]
    seen_b = [m.content for m in mb.requests[0].messages]
    assert seen_a == seen_b == ["go", "before"]


def test_s3_a_branch_sees_its_own_earlier_turns() -> None:
    """S3: within a branch, its own turns are visible to its later turns."""
    from thena_nb import loop, until_answered

    model = ScriptedModel([reply.tool("add", a=1, b=2), "done"])
    looped = loop(steps=[calc([], "X").replace(model=model)], until=until_answered)
    other = Agent("Y", model=ScriptedModel(["y"]))
    Workflow("p", [parallel([looped, other])]).run("go")
    second = [m.role for m in model.requests[1].messages]
    assert second == ["user", "assistant", "tool"]


def test_s4_turns_are_appended_in_declaration_order() -> None:
    """S4: `parallel([A, B])` gives A, B even when B answers first."""
    slow = Agent("A", model=ScriptedModel(["slow"], delay=0.05))
    fast = Agent("B", model=ScriptedModel(["fast"]))
    run = Workflow("p", [parallel([slow, fast])]).run("go")
    assert [t.agent for t in run.turns] == ["A", "B"]
    assert [t.index for t in run.turns] == [0, 1]
    assert [t.branch for t in run.turns] == [0, 1]
    assert [m.agent for m in run.history[1:]] == ["A", "B"]
    assert [t.step_path for t in run.turns] == ["p/0.parallel/0.A", "p/0.parallel/1.B"]


def test_s4_report_points_at_the_merged_turn_indexes() -> None:
    """S4: report nodes of branches index the merged turns."""
    first = Agent("First", model=ScriptedModel(["x"]))
    a = Agent("A", model=ScriptedModel(["a"], delay=0.03))
    b = Agent("B", model=ScriptedModel(["b"]))
    run = Workflow("p", [first, parallel([a, b])]).run("go")
    par = run.report.children[1]
    assert [(c.name, c.branch, c.turns) for c in par.children] == [("A", 0, [1]), ("B", 1, [2])]


def test_s5_output_and_turn_are_the_last_declared_branchs() -> None:
    """S5: after the block, ctx.output and ctx.turn are the last declared branch's."""
    seen: dict[str, object] = {}

    def after(ctx: object) -> None:
        seen["output"] = ctx.output  # type: ignore[attr-defined]
        seen["turn"] = ctx.turn.response  # type: ignore[attr-defined]

    a = Agent("A", model=ScriptedModel(["first"]))
    b = Agent("B", model=ScriptedModel(["second"], delay=0.03))
    run = Workflow("p", [parallel([a, b]), after]).run("go")
    assert seen == {"output": "second", "turn": "second"}
    assert run.output == "second"


def test_s6_a_branch_that_raises_cancels_its_siblings_and_appends_nothing() -> None:
    """S6: siblings are cancelled, not awaited to completion; nothing is appended."""
    finished: list[str] = []
    cancelled: list[str] = []
    slow_started = asyncio.Event()

    async def slow(request: object) -> str:
        slow_started.set()
        try:
            await asyncio.sleep(30)  # only a cancel ends it before the test's own bound
        except asyncio.CancelledError:
            cancelled.append("slow")
            raise
        finished.append("slow")
        return "late"

    async def boom(request: object) -> str:
        await asyncio.wait_for(slow_started.wait(), 30)  # the sibling's call is in flight
        raise KeyError("no such thing")

    first = Agent("First", model=ScriptedModel(["kept"]))
    a = Agent("A", model=FunctionModel(slow))
    b = Agent("B", model=FunctionModel(boom))
    wf = Workflow("p", [first, parallel([a, b])])
    with pytest.raises(KeyError) as info:
        wf.run("go")
    assert (cancelled, finished) == (["slow"], [])
    run = info.value.run  # type: ignore[attr-defined]
    assert run.status == "failed"
    assert [t.agent for t in run.turns] == ["First"]
    assert [m.content for m in run.history] == ["go", "kept"]
    notes = "\n".join(info.value.__notes__)
    assert "parallel branch 1 ('B') of 'p/1.parallel'" in notes
    assert "B" in run.report.children[1].error


def test_s6_the_original_exception_type_reaches_the_caller() -> None:
    """S6: the error is the branch's own exception, not a wrapper or an ExceptionGroup."""

    class Mine(Exception):
        pass

    def bad(ctx: object) -> None:
        raise Mine("mine")

    a = Agent("A", model=ScriptedModel(["a"]))
    with pytest.raises(Mine):
        Workflow("p", [parallel([a, bad])]).run("go")


def test_s6_the_failing_branchs_agent_node_is_in_the_report_with_its_error() -> None:
    """S6: the branch that raised shows in the report: its agent node carries the error,
    and its nodes point at no turn (the block appended none)."""

    def boom(request: object) -> str:
        raise KeyError("no such thing")

    a = Agent("A", model=ScriptedModel(["a"]))
    inner = Agent("B", model=ScriptedModel(["b1", "b2"]))
    b = Agent("Boom", model=FunctionModel(boom))
    wf = Workflow("p", [parallel([a, loop(steps=[inner, b], until=until_answered)])])
    with pytest.raises(KeyError) as info:
        wf.run("go", store=False)
    run = info.value.run  # type: ignore[attr-defined]
    block = run.report.children[0]
    (failed_loop,) = block.children
    assert failed_loop.kind == "loop" and failed_loop.branch == 1
    agents = [n for n in failed_loop.walk() if n.kind == "agent"]
    assert [(n.name, n.error) for n in agents] == [
        ("B", None),
        ("Boom", "KeyError: 'no such thing'"),
    ]
    assert all(n.turns == [] for n in failed_loop.walk()) and run.turns == []
