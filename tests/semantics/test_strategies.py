"""S22–S24: loop strategies and composition."""

from __future__ import annotations

from helpers import add_call, calc

from thena_nb import Workflow, loop, max_tool_calls, until_answered, until_finish_reason
from thena_nb.models import reply


def test_s22_max_tool_calls_stops_without_truncating_the_crossing_turn() -> None:
    """S22: stop once the loop made n tool calls; the turn that crosses n is not cut short."""
    two = reply.calls([("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2})])
    run = Workflow("w", [loop(steps=[calc([two, two, two])], until=max_tool_calls(3))]).run("x")
    assert run.loops[0].stop_reason == "until"
    assert run.loops[0].iterations == 2
    assert run.usage.tool_calls == 4
    assert all(len(t.tool_calls) == 2 for t in run.turns)


def test_s22_max_tool_calls_counts_only_this_loop() -> None:
    """S22: tool calls made before the loop began do not count."""
    before = calc([add_call(), add_call()], "Before")
    inside = calc([add_call(), add_call(), add_call()], "Inside")
    wf = Workflow("w", [before, loop(steps=[inside], until=max_tool_calls(2))])
    run = wf.run("x")
    assert run.loops[0].iterations == 2


def test_s23_until_finish_reason() -> None:
    """S23: stops when the last turn's finish reason is one of the given ones."""
    replies = [add_call(), reply.text("cut", finish_reason="max_tokens"), "unused"]
    run = Workflow(
        "w", [loop(steps=[calc(replies)], until=until_finish_reason("max_tokens", "refusal"))]
    ).run("x")
    assert run.loops[0].iterations == 2
    assert run.turns[-1].finish_reason == "max_tokens"


def test_s24_or_stops_when_either_holds() -> None:
    """S24: `a | b` stops when either does."""
    stop = until_answered | max_tool_calls(2)
    run = Workflow("w", [loop(steps=[calc([add_call()] * 5)], until=stop)]).run("x")
    assert run.loops[0].iterations == 2


def test_s24_and_stops_when_both_hold() -> None:
    """S24: `a & b` stops only when both do."""
    seen: list[int] = []

    def after_three(ctx: object) -> bool:
        seen.append(ctx.iteration)  # type: ignore[attr-defined]
        return ctx.iteration >= 3  # type: ignore[attr-defined]

    stop = until_answered & after_three
    run = Workflow("w", [loop(steps=[calc(["a", "b", "c", "d"])], until=stop)]).run("x")
    assert run.loops[0].iterations == 3
    assert seen == [1, 2, 3]


def test_s24_plain_functions_join_a_composition_from_either_side() -> None:
    """S24: a plain function joins a composition unchanged."""

    def never(ctx: object) -> bool:
        return False

    left = never | until_answered
    right = until_answered | never
    assert "never" in repr(left) and "until_answered" in repr(right)
    for stop in (left, right):
        run = Workflow("w", [loop(steps=[calc([add_call(), "done"])], until=stop)]).run("x")
        assert run.loops[0].iterations == 2


def test_s24_iterations_and_tool_calls_are_counted_separately() -> None:
    """S24: iterations (model turns) and tool calls are counted separately."""
    two = reply.calls([("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2})])
    run = Workflow("w", [loop(steps=[calc([two, "done"])], until=until_answered)]).run("x")
    assert run.loops[0].iterations == 2
    assert run.usage.model_calls == 2
    assert run.usage.tool_calls == 2
