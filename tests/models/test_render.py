"""`render(request)`: what each adapter puts on the wire, equal to the body the 127.0.0.1
server received through the real SDK, with no key in it; the offline models' plain data."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from chat_completions_server import ChatCompletionsServer, Completion
from messages_api_server import MessagesAPIServer, text, thinking, thinking_block

from thena_nb.core.records.model import ModelRequest, ToolSpec
from thena_nb.core.records.types import Message, ToolCall
from thena_nb.models import FunctionModel, ScriptedModel
from thena_nb.models.anthropic import AnthropicModel
from thena_nb.models.openai_compat import OpenAICompatModel

pytestmark = pytest.mark.anyio

KEY = "sk-render-sentinel-0b7e55c1"
LOOKUP = ToolSpec(
    name="lookup",
    description="Look a word up.",
    parameters={"type": "object", "properties": {"word": {"type": "string"}}},
)
HISTORY = [
    Message(role="user", content="Review the login handler."),
    Message(role="assistant", content="No injection risks.", agent="Security"),
    Message(
        role="assistant",
        content="Checking a term.",
        agent="Executor",
        tool_calls=[ToolCall(id="toolu_1", name="lookup", arguments={"word": "sql"})],
        reasoning_blocks=[thinking_block("Look up sql first.")],
    ),
    Message(role="tool", content="a query language", agent="Executor", tool_call_id="toolu_1"),
]
REQUEST = ModelRequest(
    agent="Executor", system="You are Executor.", messages=HISTORY, tools=[LOOKUP], max_tokens=4096
)


def _no_secret(params: dict[str, Any]) -> None:
    shown = json.dumps(params).lower()
    assert KEY.lower() not in shown
    for name in ("api_key", "x-api-key", "authorization", "extra_headers", "bearer"):
        assert name not in shown


# --- AnthropicModel --------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("thinking_", [None, {"type": "enabled", "budget_tokens": 2048}])
async def test_anthropic_render_is_the_body_the_server_received(
    api_server: MessagesAPIServer, stream: bool, thinking_: dict[str, Any] | None
) -> None:
    """The same dict, key for key: alternating roles, other agents as attributed user text,
    the cache breakpoints, `stream` when streaming, the thinking blocks when thinking."""
    api_server.script(thinking("Done.", text("ok")) if thinking_ else text("ok"))
    model = AnthropicModel(
        "claude-test", base_url=api_server.base_url, api_key=KEY, stream=stream, thinking=thinking_
    )
    await model.respond(REQUEST)
    params = model.render(REQUEST)
    assert api_server.requests[-1].status == 200, api_server.rejected
    assert api_server.bodies[-1] == params
    assert [m["role"] for m in params["messages"]] == ["user", "assistant", "user"]
    assert params["messages"][0]["content"][1] == {
        "type": "text",
        "text": "[Security] No injection risks.",
    }
    assert params["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert params["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert params["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert params.get("stream", False) is stream
    first_of_own_turn = params["messages"][1]["content"][0]["type"]
    assert first_of_own_turn == ("thinking" if thinking_ else "text")
    _no_secret(params)


def test_anthropic_render_is_pure() -> None:
    """Rendering changes neither the request nor the model, and gives equal dicts each time;
    a changed copy does not change the next one."""
    model = AnthropicModel("claude-test", api_key=KEY, thinking={"type": "adaptive"})
    before = REQUEST.model_dump(mode="json")
    first = model.render(REQUEST)
    first["thinking"]["type"] = "disabled"
    first["system"][0]["text"] = "changed"
    first["tools"][0]["input_schema"]["properties"].clear()
    first["messages"][1]["content"][0]["thinking"] = "changed"
    first["messages"][1]["content"][-1]["input"]["word"] = "changed"
    assert model.render(REQUEST) != first
    assert model.render(REQUEST) == model.render(REQUEST)
    assert REQUEST.model_dump(mode="json") == before
    assert model.thinking == {"type": "adaptive"}


def test_openai_render_shares_nothing_with_the_request() -> None:
    model = OpenAICompatModel("qwen3:8b", base_url="http://127.0.0.1:9/v1", api_key=KEY)
    before = REQUEST.model_dump(mode="json")
    model.render(REQUEST)["tools"][0]["function"]["parameters"]["properties"].clear()
    assert REQUEST.model_dump(mode="json") == before


# --- OpenAICompatModel -----------------------------------------------------------------------


@pytest.fixture
def chat_server() -> Iterator[ChatCompletionsServer]:
    with ChatCompletionsServer() as server:
        yield server


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("tools_mode", ["auto", "prompt", "none"])
async def test_openai_render_is_the_body_the_server_received(
    chat_server: ChatCompletionsServer, stream: bool, tools_mode: Any
) -> None:
    chat_server.add(Completion("ok"))
    model = OpenAICompatModel(
        "qwen3:8b", base_url=chat_server.base_url, api_key=KEY, stream=stream, tools_mode=tools_mode
    )
    await model.respond(REQUEST)
    params = model.render(REQUEST)
    assert chat_server.requests[-1].body == params
    assert chat_server.requests[-1].headers["authorization"] == f"Bearer {KEY}"
    system = params["messages"][0]
    assert system["role"] == "system"
    assert ("tools" in params) is (tools_mode == "auto")
    assert ("<tools>" in system["content"]) is (tools_mode == "prompt")
    if tools_mode == "prompt":
        assert '"name": "lookup"' in system["content"]
    assert params.get("stream", False) is stream
    assert "[Security] No injection risks." in params["messages"][1]["content"]
    _no_secret(params)


# --- offline models --------------------------------------------------------------------------


def test_offline_models_render_plain_data() -> None:
    expected = {
        "messages": [m.model_dump(mode="json") for m in HISTORY],
        "system": "You are Executor.",
        "tools": [LOOKUP.model_dump()],
    }
    for model in (ScriptedModel(["ok"]), FunctionModel(lambda request: "ok")):
        rendered = model.render(REQUEST)
        assert rendered == expected
        assert json.loads(json.dumps(rendered)) == expected
        assert model.requests == []  # rendering is not a call
