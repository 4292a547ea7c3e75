"""The Stepper on a pydantic-ai agent as a step: one model call per click, the tools the
framework ran shown with their results, model text escaped."""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets
import pytest
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from thena_nb import Workflow
from thena_nb.notebook import Stepper

pytestmark = pytest.mark.anyio

HOSTILE = "<script>window.__pwned = 1</script> & done"


def forecaster() -> PydanticAgent[Any, Any]:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1].parts[-1]
        if last.part_kind == "user-prompt":
            return ModelResponse(parts=[ToolCallPart("get_weather", {"city": "Lisbon"}, "c1")])
        return ModelResponse(parts=[TextPart(HOSTILE)])

    agent = PydanticAgent(FunctionModel(answer), name="Forecaster")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        return f"sunny in {city}"

    return agent


async def click(button: widgets.Button, stepper: Stepper) -> Any:
    button.click()
    assert stepper.task is not None
    return await stepper.task


async def test_the_stepper_steps_a_pydantic_ai_agent_one_model_call_at_a_time() -> None:
    stepper = Workflow.of(forecaster()).stepper("Weather in Lisbon?")
    stepper.chart_delay = 0
    turn = await click(stepper.step_button, stepper)
    assert turn.index == 0 and stepper.status == "paused"
    panel = stepper.turn_html.value
    assert "<code>get_weather</code>" in panel and "sunny in Lisbon" in panel
    await click(stepper.step_button, stepper)
    assert stepper.status == "finished" and stepper.turn_count == 2
    shown = stepper.turn_html.value
    assert "<script>" not in shown and "&lt;script&gt;" in shown


async def test_the_stepper_on_a_streaming_model_records_its_tool_calls() -> None:
    from pydantic_ai.models.test import TestModel

    agent = PydanticAgent(TestModel(), name="Tester")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        return f"sunny in {city}"

    stepper = Workflow.of(agent).stepper("Weather?")  # listens: pydantic-ai streams
    stepper.chart_delay = 0
    turn = await click(stepper.run_button, stepper)
    assert stepper.status == "finished" and stepper.turn_count == 2
    assert turn is not None
    run = stepper.session.result
    [call] = run.turns[0].tool_calls
    assert (call.name, call.ok, call.result) == ("get_weather", True, "sunny in a")
