"""A rescued call with invalid arguments is a failed tool call (DESIGN: "invalid arguments
... is a failed tool call"), as a native one is: the model gets the validation error back and
`called_tool` is true. Templates, placeholders and data that names a tool stay text."""

from __future__ import annotations

from typing import Literal

from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.core.rescue import scan_tool_calls
from thena_nb.models import ScriptedModel, reply
from thena_nb.rescue import rescue_tool_calls
from thena_nb.store import MemoryRunStore


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


@tool
def search(query: str) -> str:
    """Search the web."""
    return f"results for {query}"


def call_text(arguments: str) -> str:
    return f'<tool_call>{{"name": "get_weather", "arguments": {arguments}}}</tool_call>'


def first_turn(text: str, *more: str) -> Workflow:
    agent = Agent("A", model=ScriptedModel([text, *more]), tools=[get_weather, search])
    return Workflow("w", [loop(steps=[agent], until=until_answered, max_fails=1)])


def test_a_rescued_call_with_invalid_arguments_is_a_failed_tool_call() -> None:
    run = first_turn(call_text('{"town": "Lisbon"}'), "ok").run("x", store=False)
    turn = run.turns[0]
    assert turn.info.called_tool is True and turn.info.tool_error is True
    assert turn.info.tool_call_source == "rescued" and turn.info.tool_name == "get_weather"
    (call,) = turn.tool_calls
    assert call.ok is False and call.source == "rescued"
    native = Workflow(
        "n",
        [
            Agent(
                "A",
                model=ScriptedModel([reply.tool("get_weather", town="Lisbon")]),
                tools=[get_weather],
            )
        ],
    ).run("x", store=False)
    assert call.error == native.turns[0].tool_calls[0].error  # the same observation
    assert call.error.startswith("Error: invalid arguments for tool 'get_weather'")
    answer = next(m for m in run.history if m.role == "tool")
    assert answer.is_error and answer.tool_call_id == call.id and answer.content == call.error
    assert run.loops[0].stop_reason == "fails"  # it counts as a failure (S10)


def test_a_bad_enum_value_is_a_failed_call_too() -> None:
    run = first_turn(call_text('{"city": "Lisbon", "unit": "kelvin"}'), "ok").run("x", store=False)
    assert "- unit: Input should be 'celsius' or 'fahrenheit'" in (
        run.turns[0].tool_calls[0].error or ""
    )


def test_template_and_placeholder_calls_are_still_text() -> None:
    for text in (
        call_text('{"city": "<city>"}'),
        "For example:\n" + call_text('{"town": "Lisbon"}'),
        'The team: [{"name": "search", "role": "lead"}, {"name": "Ana", "role": "dev"}]',
        '{"search": {"hits": 3, "took_ms": 12}}',
    ):
        run = first_turn(text).run("x", store=False)
        assert run.turns[0].info.called_tool is False, text
        assert run.turns[0].tool_calls == []


def test_valid_and_invalid_rescued_calls_run_in_text_order() -> None:
    text = (
        '<tool_call>{"name": "search", "arguments": {"query": "a"}}</tool_call>\n'
        + call_text('{"town": "Lisbon"}')
        + '\n<tool_call>{"name": "search", "arguments": {"query": "b"}}</tool_call>'
    )
    run = first_turn(text, "ok").run("x", store=False)
    calls = run.turns[0].tool_calls
    assert [(c.name, c.ok) for c in calls] == [
        ("search", True),
        ("get_weather", False),
        ("search", True),
    ]
    assert [c.id.rsplit("-", 1)[1] for c in calls] == ["1", "2", "3"]


def test_the_scan_reports_invalid_calls_apart_and_rescue_tool_calls_returns_valid_ones() -> None:
    text = call_text('{"town": "Lisbon"}')
    scan = scan_tool_calls(text, [get_weather])
    assert scan.calls == [] and scan.refused == []
    assert [(c.name, c.arguments, c.ok) for c in scan.invalid] == [
        ("get_weather", {"town": "Lisbon"}, None)
    ]
    assert rescue_tool_calls(text, [get_weather]) == []


def test_a_replay_serves_the_failed_rescued_call_as_recorded() -> None:
    store = MemoryRunStore()
    wf = first_turn(call_text('{"town": "Lisbon"}'), "ok")
    run = wf.run("x", store=store)
    again = wf.run("x", replay=run, store=False)
    assert again.replay_diverged_at is None
    assert again.turns[0].tool_calls == run.turns[0].tool_calls
