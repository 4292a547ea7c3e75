"""S15–S21: stopping helpers and TurnInfo."""

from __future__ import annotations

from helpers import add_call, calc, fail_call

from thena_nb import (
    TurnInfo,
    Workflow,
    called_tool,
    loop,
    turn_of,
    until_answered,
    was_exhausted,
)
from thena_nb.models import reply


def test_s15_until_answered_is_not_called_tool() -> None:
    """S15: until_answered stops when the agent answered without calling a tool."""
    seen: list[tuple[bool, bool]] = []

    def watch(ctx: object) -> bool:
        seen.append((called_tool(ctx), until_answered(ctx)))  # type: ignore[arg-type]
        return until_answered(ctx)  # type: ignore[arg-type]

    run = Workflow("w", [loop(steps=[calc([add_call(), "answer"])], until=watch)]).run("go")
    assert seen == [(True, False), (False, True)]
    assert run.loops[0].stop_reason == "until"


def test_s16_an_empty_response_counts_as_answered() -> None:
    """S16: until_answered stops on "", a stricter condition can check the text."""
    run = Workflow("w", [loop(steps=[calc([""])], until=until_answered)]).run("go")
    assert run.loops[0].stop_reason == "until" and run.turns[0].info.response == ""

    def strict(ctx: object) -> bool:
        t = turn_of(ctx)  # type: ignore[arg-type]
        return t is not None and not t.called_tool and bool(t.response.strip())

    run = Workflow("w", [loop(steps=[calc(["", "  ", "real"])], until=strict)]).run("go")
    assert run.loops[0].iterations == 3


def test_s17_turn_of_is_none_before_any_turn() -> None:
    """S17: turn_of returns the last turn's TurnInfo, or None before any turn."""
    seen: list[object] = []
    agent = calc(["hello"])
    Workflow(
        "w", [lambda ctx: seen.append(turn_of(ctx)), agent, lambda ctx: seen.append(turn_of(ctx))]
    ).run("go")
    assert seen[0] is None
    assert seen[1] == TurnInfo(called_tool=False, response="hello")


def test_s18_turn_info_fields() -> None:
    """S18: TurnInfo has called_tool, tool_name, tool_error, tool_call_source and response."""
    run = Workflow(
        "w",
        [
            loop(
                steps=[calc([reply.calls([("fail", {})], text="trying"), "ok"])],
                until=until_answered,
            )
        ],
    ).run("x")
    info = run.turns[0].info
    assert info.model_dump() == {
        "called_tool": True,
        "tool_name": "fail",
        "tool_error": True,
        "tool_call_source": "native",
        "response": "trying",
    }
    assert run.turns[1].info.model_dump() == {
        "called_tool": False,
        "tool_name": None,
        "tool_error": None,
        "tool_call_source": None,
        "response": "ok",
    }


def test_s18_tool_name_is_the_last_call_and_error_is_any() -> None:
    """S18: tool_name is the turn's last call; tool_error is true if any call failed."""
    turn_reply = reply.calls([("fail", {}), ("add", {"a": 1, "b": 2})])
    run = Workflow("w", [calc([turn_reply])]).run("x")
    info = run.turns[0].info
    assert (info.tool_name, info.tool_error) == ("add", True)
    assert [c.ok for c in run.turns[0].tool_calls] == [False, True]


def test_s19_called_tool_counts_native_and_rescued_calls() -> None:
    """S19: called_tool is true when the model called a tool, native or rescued."""
    text_call = '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'
    flags: list[bool] = []

    def watch(ctx: object) -> bool:
        flags.append(called_tool(ctx))  # type: ignore[arg-type]
        return len(flags) == 3

    Workflow("w", [loop(steps=[calc([add_call(), text_call, "done"])], until=watch)]).run("x")
    assert flags == [True, True, False]


def test_s20_was_exhausted_is_readable_after_the_loop() -> None:
    """S20: was_exhausted is true when the most recent loop stopped at max_iterations."""
    seen: list[bool] = []
    exhausted = loop(steps=[calc([add_call()] * 2)], until=until_answered, max_iterations=2)
    answered = loop(steps=[calc(["done"], "B")], until=until_answered)
    check = lambda ctx: seen.append(was_exhausted(ctx))
    Workflow("w", [exhausted, check, answered, check]).run("x")
    assert seen == [True, False]


def test_s21_tool_call_source_native_and_rescued() -> None:
    """S21: "native" for the tool channel, "rescued" for calls parsed from text."""
    text_call = 'I will add. {"name": "add", "arguments": {"a": 2, "b": 3}}'
    run = Workflow(
        "w", [loop(steps=[calc([add_call(), text_call, "5"])], until=until_answered)]
    ).run("x")
    sources = [t.info.tool_call_source for t in run.turns]
    assert sources == ["native", "rescued", None]
    rescued = run.turns[1]
    assert rescued.tool_calls[0].source == "rescued"
    assert rescued.tool_calls[0].result == "5"
    assert rescued.info.response == text_call  # the model's text as it was


def test_s21_rescue_is_off_when_the_agent_says_so() -> None:
    """S21: with rescue=False, calls written as text are only text."""
    text_call = '{"name": "add", "arguments": {"a": 2, "b": 3}}'
    run = Workflow("w", [calc([text_call], rescue=False)]).run("x")
    assert run.turns[0].info.called_tool is False


def test_s21_rescue_runs_only_without_native_calls() -> None:
    """S21: a turn's calls are all native or all rescued."""
    text = '{"name": "add", "arguments": {"a": 2, "b": 3}}'
    run = Workflow("w", [calc([reply.calls([("add", {"a": 1, "b": 1})], text=text)])]).run("x")
    assert [c.source for c in run.turns[0].tool_calls] == ["native"]


def test_s19_fail_call_counts() -> None:
    """S19: a failed native call still counts as a call."""
    run = Workflow("w", [calc([fail_call()])]).run("x")
    assert run.turns[0].info.called_tool is True
