"""A server that answers 200 with a body that is not JSON, JSON that is no message, a broken
stream event, or token counts that cannot be (negative, beyond 64 bits): each becomes a final
`ModelError` naming the agent and the model, with a note naming the turn; never a raw
`JSONDecodeError`, `AttributeError` or `OverflowError`, and never retried."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from chat_completions_server import ChatCompletionsServer, Completion, Fault
from messages_api_server import MessagesAPIServer, raw, text, tool_use

from thena_nb import Agent, ModelError, Workflow, loop, tool, until_answered
from thena_nb.core.records.errors import TransientModelError
from thena_nb.models import AnthropicModel, OpenAICompatModel
from thena_nb.store import SqliteRunStore

pytestmark = pytest.mark.anyio

_START = (
    'event: message_start\ndata: {"type": "message_start", "message": {"id": "m", "content": [], '
    '"usage": {"input_tokens": 1, "output_tokens": 1}}}\n\n'
)
NOT_JSON = ["not json at all", '{"id": "msg_1", "type": "mess', "", "<html>502</html>"]
NOT_A_MESSAGE = [
    "[1, 2]",
    "null",
    '{"type": "message"}',
    '"hello"',
    '{"content": [{"type": "text"}]}',
    '{"content": [5], "usage": {"input_tokens": 1, "output_tokens": 1}}',
    '{"content": [{"type": "tool_use", "id": "t1"}], "usage": {"input_tokens": 1, "output_tokens": 1}}',
    '{"content": [], "usage": {"output_tokens": 1}}',
]


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _workflow(model: Any) -> Workflow:
    agent = Agent("Calc", model=model, tools=[add], rescue=False)
    return Workflow("bad", [loop(steps=[agent], until=until_answered, max_iterations=3)])


async def _second_turn_fails(model: Any, store: Any = False) -> ModelError:
    """Run a workflow whose first turn calls `add` and whose second gets the bad answer."""
    with pytest.raises(ModelError) as info:
        await _workflow(model).arun("2 + 3?", store=store)
    exc = info.value
    assert not isinstance(exc, TransientModelError)
    assert str(exc).startswith("agent 'Calc': model ")
    assert any("turn 1 of agent 'Calc'" in note for note in getattr(exc, "__notes__", []))
    run = exc.run  # type: ignore[attr-defined]
    assert run.status == "failed" and len(run.turns) == 1
    assert run.error == f"ModelError: {exc}"
    return exc


def _anthropic(server: MessagesAPIServer, *, stream: bool = False) -> AnthropicModel:
    return AnthropicModel(
        "claude-test", base_url=server.base_url, api_key="k-123456789", stream=stream
    )


@pytest.mark.parametrize("body", NOT_JSON + NOT_A_MESSAGE)
async def test_anthropic_malformed_body_is_a_model_error(body: str) -> None:
    with MessagesAPIServer() as server:
        server.script(tool_use("add", {"a": 2, "b": 3}), raw(body))
        exc = await _second_turn_fails(_anthropic(server))
        assert server.remaining() == 0 and len(server.requests) == 2  # not retried
    kind = "not JSON" if body in NOT_JSON else "not a"
    assert f"model 'claude-test': the server's answer is {kind}" in str(exc)
    assert "speaks the Messages API" in str(exc)


@pytest.mark.parametrize(
    "events",
    [
        "event: message_start\ndata: {oops\n\n",
        'event: message_start\ndata: {"type": "message_start"}\n\n',
        'event: content_block_stop\ndata: {"type": "content_block_stop", "index": 0}\n\n',
        _START + 'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 3, '
        '"delta": {"type": "text_delta", "text": "x"}}\n\n',
        _START
        + 'event: message_delta\ndata: {"type": "message_delta", "delta": {}, "usage": 7}\n\n',
    ],
    ids=["not-json", "no-message", "before-the-start", "no-such-block", "usage-no-object"],
)
async def test_anthropic_malformed_stream_event_is_a_model_error(events: str) -> None:
    with MessagesAPIServer() as server:
        server.script(
            tool_use("add", {"a": 2, "b": 3}), raw(events, content_type="text/event-stream")
        )
        exc = await _second_turn_fails(_anthropic(server, stream=True))
    assert "model 'claude-test': the server's answer is not" in str(exc)


@pytest.mark.parametrize(
    "body",
    [
        "garbage",
        "",
        "[1]",
        "null",
        '"hello"',
        '{"choices": [{"message": null}]}',
        '{"choices": [{}]}',
        '{"choices": [5]}',
        '{"choices": [{"message": {"tool_calls": [{"id": "c", "function": null}]}}]}',
        '{"choices": [{"message": {"tool_calls": 7}}]}',
    ],
)
async def test_openai_compat_malformed_body_is_a_model_error(body: str) -> None:
    with ChatCompletionsServer() as server:
        server.add(
            Completion(tool_calls=(("call_1", "add", {"a": 2, "b": 3}),)), Fault(200, body=body)
        )
        model = OpenAICompatModel("qwen-test", base_url=server.base_url)
        exc = await _second_turn_fails(model)
    assert "model 'qwen-test': the server's answer is not" in str(exc)
    assert "OpenAI chat completions API" in str(exc)


@pytest.mark.parametrize(
    "body",
    ["data: {oops\n\n", 'data: {"choices": 5}\n\n', 'data: {"choices": [{}]}\n\n', "data: [1]\n\n"],
)
async def test_openai_compat_malformed_stream_chunk_is_a_model_error(body: str) -> None:
    with ChatCompletionsServer() as server:
        server.add(
            Completion(tool_calls=(("call_1", "add", {"a": 2, "b": 3}),)), Fault(200, body=body)
        )
        model = OpenAICompatModel("qwen-test", base_url=server.base_url, stream=True)
        exc = await _second_turn_fails(model)
    assert "model 'qwen-test': the server's answer is not" in str(exc)


@pytest.mark.parametrize("count", [-10_000, 10**30], ids=["negative", "beyond-64-bits"])
async def test_anthropic_impossible_token_count_is_a_model_error(
    tmp_path: Path, count: int
) -> None:
    with MessagesAPIServer() as server:
        server.script(tool_use("add", {"a": 2, "b": 3}), text("5", input_tokens=count))
        store = SqliteRunStore(tmp_path / "runs.db")
        try:
            exc = await _second_turn_fails(_anthropic(server), store=store)
            stored = store.load(exc.run.run_id)  # type: ignore[attr-defined]
        finally:
            store.close()
    assert str(exc).startswith(f"agent 'Calc': model 'claude-test' reported input_tokens={count}:")
    run = exc.run  # type: ignore[attr-defined]
    assert run.usage.input_tokens == 10  # the bad count never joined the run's usage
    assert len(run.frame()) == 1
    assert [t.input_tokens for t in stored.turns] == [10] and stored.status == "failed"


async def test_openai_compat_impossible_token_count_is_a_model_error() -> None:
    with ChatCompletionsServer() as server:
        server.add(
            Completion(tool_calls=(("call_1", "add", {"a": 2, "b": 3}),)),
            Completion("5", completion_tokens=-3),
        )
        exc = await _second_turn_fails(OpenAICompatModel("qwen-test", base_url=server.base_url))
    assert "model 'qwen-test' reported output_tokens=-3" in str(exc)
