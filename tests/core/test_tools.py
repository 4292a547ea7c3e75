"""`@tool`: schemas, the Context parameter, sync and async, validation, error observations."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel

from thena_nb import Agent, Context, Workflow, loop, tool, until_answered
from thena_nb.core.parts.tools import error_observation, run_tool_call
from thena_nb.core.records.types import ToolCall
from thena_nb.models import ScriptedModel, reply


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Current weather for a city."""
    return f"18 degrees {unit} in {city}"


def test_schema_comes_from_the_signature_and_the_docstring() -> None:
    spec = get_weather.spec
    assert spec.name == "get_weather"
    assert spec.description == "Current weather for a city."
    assert spec.parameters == {
        "additionalProperties": False,
        "properties": {
            "city": {"type": "string"},
            "unit": {"default": "celsius", "enum": ["celsius", "fahrenheit"], "type": "string"},
        },
        "required": ["city"],
        "type": "object",
    }


def test_a_context_parameter_is_left_out_of_the_schema_and_receives_the_context() -> None:
    class Notes(BaseModel):
        items: list[str] = []

    @tool
    def note(ctx: Context, text: str) -> str:
        """Write a note into the state."""
        ctx.state.items.append(text)
        return f"noted ({ctx.iteration})"

    assert list(note.spec.parameters["properties"]) == ["text"]
    agent = Agent("A", model=ScriptedModel([reply.tool("note", text="hi"), "ok"]), tools=[note])
    run = Workflow("w", [loop(steps=[agent], until=until_answered)], state=Notes).run("x")
    assert run.state.items == ["hi"]
    assert run.turns[0].tool_calls[0].result == "noted (1)"


def test_tool_options_and_overrides() -> None:
    @tool(name="lookup", description="Look it up.", retries=2, rescue=False)
    def f(q: str) -> str:
        return q

    assert (f.name, f.description, f.retries, f.rescue) == ("lookup", "Look it up.", 2, False)
    assert f("direct") == "direct"
    assert repr(f) == "Tool('lookup')"


@pytest.mark.anyio
async def test_async_tools_and_results_as_text() -> None:
    @tool
    async def numbers(n: int) -> list[int]:
        """Numbers."""
        return list(range(n))

    done = await run_tool_call(
        ToolCall(id="1", name="numbers", arguments={"n": 3}), {"numbers": numbers}, None
    )
    assert (done.ok, done.result) == (True, "[0, 1, 2]")


@pytest.mark.anyio
async def test_blocking_tools_run_in_a_thread() -> None:
    import threading

    main = threading.get_ident()

    @tool(blocking=True)
    def where() -> str:
        """Which thread."""
        return "same" if threading.get_ident() == main else "worker"

    done = await run_tool_call(ToolCall(id="1", name="where"), {"where": where}, None)
    assert done.result == "worker"


@pytest.mark.anyio
async def test_unknown_tool_observation_lists_the_tools() -> None:
    done = await run_tool_call(
        ToolCall(id="1", name="get_wether", arguments={"city": "Oslo"}),
        {"get_weather": get_weather},
        None,
    )
    assert done.ok is False
    assert done.error == "Error: unknown tool 'get_wether'. Available tools: 'get_weather'."


@pytest.mark.anyio
async def test_invalid_arguments_observation_lists_each_field() -> None:
    call = ToolCall(id="1", name="get_weather", arguments={"unit": "kelvin", "extra": 1})
    done = await run_tool_call(call, {"get_weather": get_weather}, None)
    assert done.error == (
        'Error: invalid arguments for tool \'get_weather\' {"unit": "kelvin", "extra": 1}:\n'
        "- city: Field required\n"
        "- unit: Input should be 'celsius' or 'fahrenheit'\n"
        "- extra: Extra inputs are not permitted\n"
        "Call the tool again with corrected arguments."
    )


@pytest.mark.anyio
async def test_a_raising_tool_becomes_an_observation_and_retries_are_recorded() -> None:
    attempts: list[int] = []

    @tool(retries=2)
    def flaky(n: int) -> str:
        """Fails twice."""
        attempts.append(n)
        if len(attempts) < 3:
            raise ConnectionError("reset")
        return "fine"

    done = await run_tool_call(
        ToolCall(id="1", name="flaky", arguments={"n": 1}), {"flaky": flaky}, None
    )
    assert (done.ok, done.result, done.retries) == (True, "fine", 2)

    @tool
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("disk full")

    done = await run_tool_call(ToolCall(id="2", name="broken"), {"broken": broken}, None)
    assert done.error == "Error: tool 'broken' {} raised RuntimeError: disk full"


def test_a_failing_tool_never_aborts_the_run() -> None:
    @tool
    def explode() -> str:
        """Explodes."""
        raise ZeroDivisionError("division by zero")

    agent = Agent("A", model=ScriptedModel([reply.tool("explode"), "recovered"]), tools=[explode])
    run = Workflow("w", [loop(steps=[agent], until=until_answered)]).run("x")
    assert run.status == "finished" and run.output == "recovered"
    assert "ZeroDivisionError: division by zero" in run.history[2].content


def test_error_observation_for_a_refused_call() -> None:
    text = error_observation("send_mail", {"to": "x"}, reason="it only runs from the tool channel")
    assert text == "Error: tool 'send_mail' was not run: it only runs from the tool channel"


def test_varargs_cannot_be_described() -> None:
    with pytest.raises(TypeError, match=r"\*args"):

        @tool
        def f(*args: int) -> None:
            """No."""


def test_agent_rejects_duplicate_tool_names() -> None:
    with pytest.raises(ValueError, match="two tools named 'get_weather'"):
        Agent("A", model=ScriptedModel([]), tools=[get_weather, get_weather])


def test_plain_functions_are_wrapped() -> None:
    def shout(text: str) -> str:
        """Shout."""
        return text.upper()

    agent = Agent("A", model=ScriptedModel([reply.tool("shout", text="hi")]), tools=[shout])
    run = Workflow("w", [agent]).run("x")
    assert run.turns[0].tool_calls[0].result == "HI"


@pytest.mark.parametrize("name", ["my tool", "<lambda>", "", "a" * 65, "dots.not.ok", "ünï"])
def test_a_tool_name_the_apis_reject_is_refused_at_definition(name: str) -> None:
    with pytest.raises(ValueError, match=r"is not accepted by the model APIs: use 1 to 64"):
        tool(lambda x: x, name=name)


def test_a_lambda_without_a_name_is_told_to_give_one() -> None:
    with pytest.raises(ValueError, match=r"tool name '<lambda>' is not accepted.*name="):
        tool(lambda x: x)
    assert tool(lambda x: x, name="echo-1_ok").name == "echo-1_ok"
