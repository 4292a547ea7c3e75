"""S7–S14: loops."""

from __future__ import annotations

import math

import pytest
from helpers import add_call, calc, fail_call
from pydantic import BaseModel

from thena_nb import (
    DEFAULT_MAX_FAILS,
    DEFAULT_MAX_ITERATIONS,
    Agent,
    LoopFailure,
    Workflow,
    WorkflowDefinitionError,
    loop,
    until_answered,
)
from thena_nb.models import ScriptedModel


def test_s7_defaults() -> None:
    """S7: max_iterations defaults to 10 and max_fails to 5."""
    step = loop(steps=[calc(["x"])], until=until_answered)
    assert (DEFAULT_MAX_ITERATIONS, DEFAULT_MAX_FAILS) == (10, 5)
    assert (step.max_iterations, step.max_fails) == (10, 5)
    assert step.kind == "loop"


def test_s7_default_max_iterations_applies() -> None:
    """S7: a loop that never stops runs 10 iterations."""
    agent = calc([add_call()] * 12)
    run = Workflow("w", [loop(steps=[agent], until=until_answered)]).run("go")
    assert run.loops[0].iterations == 10
    assert run.loops[0].stop_reason == "exhausted"


class Review(BaseModel):
    approved: bool = False


def test_s8_until_receives_the_state() -> None:
    """S8: `until(ctx, state)` receives the workflow's state object."""
    seen: list[object] = []

    def approve(ctx: object) -> None:
        ctx.state.approved = ctx.iteration == 2  # type: ignore[attr-defined]

    def until(ctx: object, state: Review) -> bool:
        seen.append(state)
        return state.approved

    wf = Workflow("w", [loop(steps=[approve], until=until)], state=Review)
    run = wf.run("go")
    assert run.loops[0].iterations == 2
    assert run.loops[0].stop_reason == "until"
    assert all(s is run.state for s in seen)


def test_s8_until_with_an_optional_state_works_without_state() -> None:
    """S8: `until(ctx, state=None)` is accepted in a workflow without state and gets None."""
    seen: list[object] = []

    def until(ctx: object, state: object = None) -> bool:
        seen.append(state)
        return True

    Workflow("w", [loop(steps=[calc(["x"])], until=until)]).run("go")
    assert seen == [None]


def test_s9_until_with_state_in_a_stateless_workflow_is_rejected() -> None:
    """S9: rejected from the arity before the run, with no model call made."""
    model = ScriptedModel(["x"])

    def until(ctx: object, state: object) -> bool:
        return True

    with pytest.raises(WorkflowDefinitionError) as info:
        Workflow("review", [Agent("A", model=model), loop(steps=[calc(["x"])], until=until)])
    assert "loop 'review/1.loop'" in str(info.value)
    assert "has no `state=`" in str(info.value)
    assert model.requests == []


def test_s9_a_composed_until_is_checked_through_every_part() -> None:
    """S9: a composition is checked through every part."""

    def needs_state(ctx: object, state: object) -> bool:
        return True

    with pytest.raises(WorkflowDefinitionError, match="needs_state"):
        Workflow("w", [loop(steps=[calc(["x"])], until=until_answered | needs_state)])


def test_s10_a_working_call_resets_the_streak_but_total_keeps_counting() -> None:
    """S10: consecutive resets on a working call; total counts since the loop began."""
    infos: list[LoopFailure] = []
    agent = calc([fail_call(), fail_call(), add_call(), fail_call(), "done"])
    step = loop(steps=[agent], until=until_answered, on_fail=lambda ctx, i: infos.append(i))
    run = Workflow("w", [step]).run("go")
    assert [(i.consecutive, i.total) for i in infos] == [(1, 1), (2, 2), (1, 3)]
    assert [t.consecutive_fails for t in run.turns] == [1, 2, 0, 1, 1]
    assert run.loops[0].failures == infos[-1]
    assert run.loops[0].stop_reason == "until"


def test_s10_max_fails_stops_the_loop_on_consecutive_failures() -> None:
    """S10: the streak reaching max_fails stops the loop with `fails`."""
    agent = calc([fail_call(), add_call(), fail_call(), fail_call(), "unused"])
    run = Workflow("w", [loop(steps=[agent], until=until_answered, max_fails=2)]).run("go")
    assert run.loops[0].stop_reason == "fails"
    assert run.loops[0].iterations == 4
    assert len(run.turns) == 4


def test_s10_infinite_max_fails_turns_the_limit_off() -> None:
    """S10: `math.inf` turns the limit off."""
    agent = calc([fail_call()] * 7 + ["done"])
    step = loop(steps=[agent], until=until_answered, max_fails=math.inf, max_iterations=20)
    run = Workflow("w", [step]).run("go")
    assert run.loops[0].stop_reason == "until"
    assert run.turns[-2].consecutive_fails == 7


def test_s10_fails_stops_before_the_rest_of_the_iteration() -> None:
    """S10: a loop that stops on `fails` stops at once; the rest of the iteration does not run."""
    ran: list[int] = []
    agent = calc([fail_call()])
    step = loop(steps=[agent, lambda ctx: ran.append(1)], until=until_answered, max_fails=1)
    run = Workflow("w", [step]).run("go")
    assert run.loops[0].stop_reason == "fails"
    assert ran == []


def test_s11_on_fail_message_is_exactly_the_observation_sent_back() -> None:
    """S11: `message` is exactly the error observation sent back to the model."""
    infos: list[LoopFailure] = []
    agent = calc([fail_call(), "done"])
    step = loop(steps=[agent], until=until_answered, on_fail=lambda ctx, i: infos.append(i))
    run = Workflow("w", [step]).run("go")
    tool_message = run.history[2]
    assert tool_message.role == "tool" and tool_message.is_error
    assert infos[0].message == tool_message.content
    assert infos[0].tool_name == "fail"
    assert infos[0].message == "Error: tool 'fail' {} raised ValueError: boom"


def test_s12_loop_node_records_stop_reason_and_iterations() -> None:
    """S12: the loop node records its stop reason and iteration count."""
    run = Workflow("w", [loop(steps=[calc([add_call(), "ok"])], until=until_answered)]).run("x")
    node = run.loops[0]
    assert (node.kind, node.path, node.stop_reason, node.iterations) == (
        "loop",
        "w/0.loop",
        "until",
        2,
    )
    assert [c.iteration for c in node.children] == [1, 2]


def test_s13_exhausted_calls_on_exhausted_once() -> None:
    """S13: at max_iterations without until, stop with `exhausted` and call on_exhausted once."""
    calls: list[int] = []
    agent = calc([add_call()] * 3)
    step = loop(
        steps=[agent],
        until=until_answered,
        max_iterations=3,
        on_exhausted=lambda ctx, n: calls.append(n),
    )
    run = Workflow("w", [step]).run("go")
    assert calls == [3]
    assert run.loops[0].stop_reason == "exhausted"


def test_s14_until_on_the_last_allowed_iteration_is_until() -> None:
    """S14: until true on the last allowed iteration is `until`, not `exhausted`."""
    calls: list[int] = []
    agent = calc([add_call(), add_call(), "answer"])
    step = loop(
        steps=[agent],
        until=until_answered,
        max_iterations=3,
        on_exhausted=lambda ctx, n: calls.append(n),
    )
    run = Workflow("w", [step]).run("go")
    assert run.loops[0].stop_reason == "until"
    assert calls == []
