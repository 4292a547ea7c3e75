"""`OpenAICompatModel` through the real `openai` SDK against a chat completions server on
127.0.0.1 (`chat_completions_server.py`): request mapping, replies, tool modes, faults,
streaming and the API key."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from chat_completions_server import (
    ChatCompletionsServer,
    Completion,
    Drop,
    Fault,
    Slow,
    completion_json,
)

from thena_nb import Agent, Message, ToolCall, Workflow, loop, tool, until_answered
from thena_nb.core.parts.tools import run_tool_call
from thena_nb.models import ModelError, ModelRequest, Reply, RetryPolicy, TransientModelError
from thena_nb.models.openai_compat import (
    CONTINUE_PROMPT,
    INVALID_ARGUMENTS_KEY,
    START_PROMPT,
    OpenAICompatModel,
    map_history,
    parse_arguments,
)

pytestmark = pytest.mark.anyio

SENTINEL_KEY = "sk-sentinel-4f2a9c7e1b"


@pytest.fixture
def server() -> Iterator[ChatCompletionsServer]:
    with ChatCompletionsServer() as s:
        yield s


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
        "description": "Current weather for a city.",
    },
}


def _model(server: ChatCompletionsServer, **kwargs: Any) -> OpenAICompatModel:
    kwargs.setdefault("timeout", 5.0)
    return OpenAICompatModel("qwen2.5:7b", base_url=server.base_url, **kwargs)


def _request(*messages: Message, **kwargs: Any) -> ModelRequest:
    kwargs.setdefault("agent", "Weather")
    kwargs.setdefault("system", "You are a weather bot.")
    kwargs.setdefault("tools", [get_weather.spec])
    return ModelRequest(messages=list(messages), **kwargs)


USER = Message(role="user", content="Weather in Lisbon?")


# --- requests and replies -------------------------------------------------------------------


async def test_tool_loop_round_trip_keeps_ids(server: ChatCompletionsServer) -> None:
    """A native call comes back with its id, and the next request sends that id in
    `tool_calls` and in the `tool` message that answers it."""
    server.add(
        Completion(tool_calls=(("call_abc", "get_weather", {"city": "Lisbon"}),)),
        Completion("It is sunny in Lisbon.", prompt_tokens=30, completion_tokens=7),
    )
    model = _model(server)

    first = await model.respond(_request(USER))

    assert first == Reply(
        tool_calls=[ToolCall(id="call_abc", name="get_weather", arguments={"city": "Lisbon"})],
        finish_reason="tool_calls",
        input_tokens=10,
        output_tokens=5,
        response_model=model.name,  # what the server said answered
        response_id="chatcmpl-test",
    )
    assert first.tool_calls[0].source == "native"
    done = await run_tool_call(first.tool_calls[0], {"get_weather": get_weather}, None)
    history = [
        USER,
        Message(role="assistant", content="", agent="Weather", tool_calls=[done]),
        Message(role="tool", content=done.result or "", agent="Weather", tool_call_id="call_abc"),
    ]

    second = await model.respond(_request(*history))

    assert second.text == "It is sunny in Lisbon."
    assert second.tool_calls == []
    assert (second.finish_reason, second.input_tokens, second.output_tokens) == ("stop", 30, 7)
    assert [r.body for r in server.requests] == [
        {
            "model": "qwen2.5:7b",
            "messages": [
                {"role": "system", "content": "You are a weather bot."},
                {"role": "user", "content": "Weather in Lisbon?"},
            ],
            "max_tokens": 1024,
            "tools": [WEATHER_TOOL],
        },
        {
            "model": "qwen2.5:7b",
            "messages": [
                {"role": "system", "content": "You are a weather bot."},
                {"role": "user", "content": "Weather in Lisbon?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_abc",
                            "type": "function",
                            "function": {
                                "name": "get_weather",
                                "arguments": '{"city": "Lisbon"}',
                            },
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_abc", "content": "sunny in Lisbon"},
            ],
            "max_tokens": 1024,
            "tools": [WEATHER_TOOL],
        },
    ]
    assert server.requests[0].path == "/v1/chat/completions"


async def test_several_native_calls_keep_their_order(server: ChatCompletionsServer) -> None:
    """Several calls in one answer come back in the server's order with their ids."""
    server.add(
        Completion(
            "Checking both.",
            tool_calls=(
                ("call_1", "get_weather", {"city": "Lisbon"}),
                ("call_2", "get_weather", {"city": "Porto"}),
            ),
        )
    )
    reply = await _model(server).respond(_request(USER))
    assert reply.text == "Checking both."
    assert [(c.id, c.arguments["city"]) for c in reply.tool_calls] == [
        ("call_1", "Lisbon"),
        ("call_2", "Porto"),
    ]


async def test_call_written_as_text_comes_back_unchanged(server: ChatCompletionsServer) -> None:
    """A server that returns the call in `content` gives that text back as it was, with no
    native call: rescue is the executor's job, not the adapter's."""
    text = (
        "Let me check.\n<tool_call>\n"
        '{"name": "get_weather", "arguments": {"city": "Lisbon"}}\n</tool_call>'
    )
    server.add(Completion(text))
    reply = await _model(server).respond(_request(USER))
    assert reply.text == text
    assert reply.tool_calls == []
    assert reply.finish_reason == "stop"


async def test_usage_with_cached_tokens(server: ChatCompletionsServer) -> None:
    """`prompt_tokens_details.cached_tokens` becomes `cache_read_tokens` when present."""
    server.add(Completion("ok", prompt_tokens=120, completion_tokens=3, cached_tokens=100))
    reply = await _model(server).respond(_request(USER))
    assert (reply.input_tokens, reply.output_tokens, reply.cache_read_tokens) == (120, 3, 100)
    assert reply.cache_write_tokens == 0


async def test_other_agents_and_rescued_results_are_user_text(
    server: ChatCompletionsServer,
) -> None:
    """Other agents' turns are attributed user text; a rescued call's result goes back as
    user text (its id was never the server's); the history ending with the agent's own
    answer gets a continuation message."""
    rescued = ToolCall(
        id="rescued-1-0",
        name="get_weather",
        arguments={"city": "Porto"},
        source="rescued",
        ok=True,
        result="sunny in Porto",
    )
    other_call = ToolCall(
        id="call_x", name="get_weather", arguments={"city": "Faro"}, ok=False, error="Error: x"
    )
    said = '<tool_call>{"name": "get_weather", "arguments": {"city": "Porto"}}</tool_call>'
    history = [
        USER,
        Message(role="assistant", content="Faro first.", agent="Scout", tool_calls=[other_call]),
        Message(
            role="tool", content="Error: x", agent="Scout", tool_call_id="call_x", is_error=True
        ),
        Message(role="assistant", content=said, agent="Weather", tool_calls=[rescued]),
        Message(role="tool", content="sunny in Porto", agent="Weather", tool_call_id="rescued-1-0"),
        Message(role="assistant", content="Porto is sunny.", agent="Weather"),
    ]
    server.add(Completion("Done."))

    await _model(server).respond(_request(*history, system=""))

    assert server.requests[0].messages == [
        {
            "role": "user",
            "content": (
                "Weather in Lisbon?\n\n"
                "[Scout] Faro first.\n"
                '[Scout] called `get_weather` with {"city": "Faro"}\n\n'
                "[Scout] `get_weather` failed:\nError: x"
            ),
        },
        {"role": "assistant", "content": said},
        {"role": "user", "content": "Your call to `get_weather` returned:\nsunny in Porto"},
        {"role": "assistant", "content": "Porto is sunny."},
        {"role": "user", "content": CONTINUE_PROMPT},
    ]


def test_call_without_a_result_is_sent_as_text() -> None:
    """A native call no `tool` message answers (a history processor cut it) is shown as text,
    since the API rejects an unanswered `tool_calls` entry."""
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Lisbon"})
    wire = map_history(
        [USER, Message(role="assistant", content="Hm.", agent="A", tool_calls=[call])], agent="A"
    )
    assert wire[1] == {
        "role": "assistant",
        "content": 'Hm.\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lisbon"}}'
        "\n</tool_call>",
    }


async def test_default_request_needs_no_tools(server: ChatCompletionsServer) -> None:
    """An agent without tools sends no `tools` field and no system message when it has none."""
    server.add(Completion("hello"))
    await _model(server).respond(_request(USER, tools=[], system="", max_tokens=64))
    assert server.requests[0].body == {
        "model": "qwen2.5:7b",
        "messages": [{"role": "user", "content": "Weather in Lisbon?"}],
        "max_tokens": 64,
    }


# --- tool modes ----------------------------------------------------------------------------


async def test_prompt_mode_works_where_tools_are_rejected() -> None:
    """`tools_mode="prompt"` describes the tools in the system prompt in the Hermes format and
    sends nothing tool-shaped, so a server without tool support accepts the whole loop,
    earlier native calls included."""
    native = ToolCall(
        id="call_1", name="get_weather", arguments={"city": "Faro"}, ok=True, result="rain"
    )
    history = [
        USER,
        Message(role="assistant", content="", agent="Weather", tool_calls=[native]),
        Message(role="tool", content="rain", agent="Weather", tool_call_id="call_1"),
    ]
    answer = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lisbon"}}\n</tool_call>'
    with ChatCompletionsServer([Completion(answer)], tools_supported=False) as server:
        reply = await _model(server, tools_mode="prompt").respond(_request(*history))

    assert reply.text == answer
    assert reply.tool_calls == []
    body = server.requests[0].body
    assert "tools" not in body
    system = body["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("You are a weather bot.\n\n# Tools\n")
    listed = system["content"].split("<tools>\n")[1].split("\n</tools>")[0]
    assert [json.loads(line) for line in listed.splitlines()] == [WEATHER_TOOL]
    assert "<tool_call>" in system["content"]
    assert "Your call to `<function name>` returned:" in system["content"]
    assert body["messages"][1:] == [
        {"role": "user", "content": "Weather in Lisbon?"},
        {
            "role": "assistant",
            "content": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Faro"}}'
            "\n</tool_call>",
        },
        {"role": "user", "content": "Your call to `get_weather` returned:\nrain"},
    ]


async def test_auto_mode_against_a_server_without_tools_is_a_final_error() -> None:
    """The same server rejects `tools` with 400: a final `ModelError` that says what the
    server said."""
    with ChatCompletionsServer(tools_supported=False) as server, pytest.raises(ModelError) as info:
        await _model(server).respond(_request(USER))
    assert not isinstance(info.value, TransientModelError)
    assert info.value.status_code == 400
    assert "does not support tools" in str(info.value)
    assert isinstance(info.value.__cause__, openai.BadRequestError)


async def test_none_mode_sends_no_tools() -> None:
    """`tools_mode="none"` sends neither a `tools` field nor a tool section, and earlier
    native calls go as text, so a server without tool support accepts it."""
    native = ToolCall(id="call_1", name="get_weather", arguments={}, ok=False, error="Error: y")
    history = [
        USER,
        Message(role="assistant", content="", agent="Weather", tool_calls=[native]),
        Message(
            role="tool", content="Error: y", agent="Weather", tool_call_id="call_1", is_error=True
        ),
    ]
    with ChatCompletionsServer([Completion("ok")], tools_supported=False) as server:
        await _model(server, tools_mode="none").respond(_request(*history))
    body = server.requests[0].body
    assert "tools" not in body
    assert body["messages"] == [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "Weather in Lisbon?"},
        {
            "role": "assistant",
            "content": '<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>',
        },
        {"role": "user", "content": "Your call to `get_weather` failed:\nError: y"},
    ]


def test_history_that_starts_with_the_model() -> None:
    """A history that does not start with a user message gets `START_PROMPT` first; an empty
    own answer is left out."""
    wire = map_history(
        [
            Message(role="assistant", content="Hello.", agent="A"),
            Message(role="assistant", content="", agent="A"),
            Message(role="user", content="Hi."),
        ],
        agent="A",
    )
    assert wire == [
        {"role": "user", "content": START_PROMPT},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Hi."},
    ]


# --- malformed arguments ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"city": "Lisbon"}', {"city": "Lisbon"}),
        ("", {}),
        ('"{\\"city\\": \\"Lisbon\\"}"', {"city": "Lisbon"}),
        ('{"city": Lisbon', {INVALID_ARGUMENTS_KEY: '{"city": Lisbon'}),
        ('["Lisbon"]', {INVALID_ARGUMENTS_KEY: '["Lisbon"]'}),
        ('"Lisbon"', {INVALID_ARGUMENTS_KEY: '"Lisbon"'}),
    ],
)
def test_parse_arguments(raw: str, expected: dict[str, Any]) -> None:
    """Tested directly because the rule is the adapter's documented choice: an object, `{}`
    for nothing, one more decode for a JSON string, else the raw text under one key."""
    assert parse_arguments(raw) == expected


async def test_malformed_arguments_give_a_failed_call(server: ChatCompletionsServer) -> None:
    """`arguments` that are not JSON never crash: the native call keeps the raw text, fails
    validation, and its error observation shows the model what it wrote."""
    server.add(Completion(tool_calls=(("call_9", "get_weather", '{"city": Lisbon'),)))
    reply = await _model(server).respond(_request(USER))

    (call,) = reply.tool_calls
    assert call == ToolCall(
        id="call_9",
        name="get_weather",
        arguments={INVALID_ARGUMENTS_KEY: '{"city": Lisbon'},
        source="native",
    )
    done = await run_tool_call(call, {"get_weather": get_weather}, None)
    assert done.ok is False
    assert done.error == (
        "Error: invalid arguments for tool 'get_weather' "
        '{"_raw_arguments": "{\\"city\\": Lisbon"}:\n'
        "- city: Field required\n"
        "- _raw_arguments: Extra inputs are not permitted\n"
        "Call the tool again with corrected arguments."
    )


@pytest.mark.parametrize(
    ("stream", "message"),
    [(False, "the server returned no choices"), (True, "the stream ended without an answer")],
)
async def test_empty_answer_is_a_final_error(
    server: ChatCompletionsServer, stream: bool, message: str
) -> None:
    """An answer without choices (or a stream without chunks) is a final `ModelError`."""
    empty = '{"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": []}'
    server.add(Fault(200, body=empty))
    with pytest.raises(ModelError) as info:
        await _model(server, stream=stream).respond(_request(USER))
    assert type(info.value) is ModelError
    assert str(info.value) == f"agent 'Weather': model 'qwen2.5:7b': {message}"
    assert info.value.model_name == "qwen2.5:7b"


async def test_missing_call_id_gets_one(server: ChatCompletionsServer) -> None:
    """A server that leaves out a call's id still yields a call with a usable id, shaped as
    the API's own (`call_` and 24 hex digits), never the same twice."""
    call = (None, "get_weather", {"city": "Lisbon"})
    server.add(Completion(tool_calls=(call, call)))
    reply = await _model(server).respond(_request(USER))
    ids = [c.id for c in reply.tool_calls]
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", i) for i in ids), ids
    assert len(set(ids)) == 2


def _answer_body(answer: Completion, **call_fields: Any) -> str:
    """`answer` as the JSON body the server sends, its first call's fields changed
    (a value of `None` leaves the field out)."""
    body = completion_json(answer, "qwen2.5:7b")
    call = body["choices"][0]["message"]["tool_calls"][0]
    for name, value in call_fields.items():
        call.pop(name) if value is None else call.__setitem__(name, value)
    return json.dumps(body)


@pytest.mark.parametrize(("kind", "read"), [(None, True), ("function", True), ("custom", False)])
async def test_call_type_left_out_means_a_function(
    server: ChatCompletionsServer, kind: str | None, read: bool
) -> None:
    """A call whose `type` the server left out is a function call, as the API's only kind
    of call through `tools`; a call of another type is no tool call of the agent's."""
    answer = Completion(tool_calls=(("call_1", "get_weather", {"city": "Lisbon"}),))
    server.add(Fault(200, body=_answer_body(answer, type=kind)))
    reply = await _model(server).respond(_request(USER))
    calls = [(c.id, c.name, c.arguments, c.source) for c in reply.tool_calls]
    assert calls == ([("call_1", "get_weather", {"city": "Lisbon"}, "native")] if read else [])


async def test_json_answer_under_another_content_type(server: ChatCompletionsServer) -> None:
    """A completion sent as `text/plain` (as some proxies label it) is read all the same,
    as the SDK reads it; a body that is not JSON at all stays an error that says so."""
    answer = Completion("Sunny.", prompt_tokens=12, completion_tokens=2)
    server.add(Fault(200, body=json.dumps(completion_json(answer, "m")), content_type="text/plain"))
    server.add(Fault(200, body="Sunny.", content_type="text/plain"))
    reply = await _model(server).respond(_request(USER))
    assert (reply.text, reply.input_tokens, reply.output_tokens) == ("Sunny.", 12, 2)
    with pytest.raises(ModelError, match="the server's answer is not JSON"):
        await _model(server).respond(_request(USER))


# --- faults --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "status", "retry_after", "cause"),
    [
        (Fault(429, "slow down", {"retry-after": "2"}), 429, 2.0, openai.RateLimitError),
        (Fault(429, "slow down", {"retry-after-ms": "1500"}), 429, 1.5, openai.RateLimitError),
        (Fault(500, "boom"), 500, None, openai.InternalServerError),
        (Fault(503, "overloaded"), 503, None, openai.InternalServerError),
    ],
)
async def test_transient_statuses(
    server: ChatCompletionsServer,
    fault: Fault,
    status: int,
    retry_after: float | None,
    cause: type[Exception],
) -> None:
    """429 and 5xx raise `TransientModelError` with the server's wait, after exactly one
    request: the SDK's own retries are off."""
    server.add(fault)
    with pytest.raises(TransientModelError) as info:
        await _model(server).respond(_request(USER))
    err = info.value
    assert (err.status_code, err.retry_after, err.model_name) == (status, retry_after, "qwen2.5:7b")
    assert str(err) == f"agent 'Weather': model 'qwen2.5:7b': HTTP {status}: {fault.message}"
    assert isinstance(err.__cause__, cause)
    assert len(server.requests) == 1


async def test_final_status_names_agent_status_and_message(server: ChatCompletionsServer) -> None:
    """Any other status is a final `ModelError` naming the agent, the status and what the
    server said, with the SDK's exception as `__cause__`."""
    server.add(Fault(404, "model 'qwen2.5:7b' not found, try pulling it first"))
    with pytest.raises(ModelError) as info:
        await _model(server).respond(_request(USER))
    err = info.value
    assert type(err) is ModelError
    assert str(err) == (
        "agent 'Weather': model 'qwen2.5:7b': HTTP 404: "
        "model 'qwen2.5:7b' not found, try pulling it first"
    )
    assert err.status_code == 404
    assert isinstance(err.__cause__, openai.NotFoundError)
    assert len(server.requests) == 1


async def test_plain_text_error_body(server: ChatCompletionsServer) -> None:
    """A server that answers an error with plain text has that text in the message."""
    server.add(Fault(502, body="upstream went away"))
    with pytest.raises(TransientModelError, match=r"HTTP 502: upstream went away$"):
        await _model(server).respond(_request(USER))


async def test_timeout_is_transient(server: ChatCompletionsServer) -> None:
    """A reply slower than the timeout raises `TransientModelError` from the SDK's timeout."""
    server.add(Slow(1.5))
    with pytest.raises(TransientModelError, match="timed out") as info:
        await _model(server, timeout=0.3).respond(_request(USER))
    assert isinstance(info.value.__cause__, openai.APITimeoutError)
    assert len(server.requests) == 1


async def test_dropped_connection_is_transient(server: ChatCompletionsServer) -> None:
    """A connection closed without an answer raises `TransientModelError`."""
    server.add(Drop())
    with pytest.raises(TransientModelError) as info:
        await _model(server).respond(_request(USER))
    assert isinstance(info.value.__cause__, openai.APIConnectionError)
    assert info.value.status_code is None
    assert len(server.requests) == 1


async def test_unreachable_server_is_transient() -> None:
    """Nothing listening is transient too, and the message names where it looked."""
    with ChatCompletionsServer() as s:
        url = s.base_url
    model = OpenAICompatModel("m", base_url=url, timeout=2.0)
    with pytest.raises(TransientModelError, match=r"could not reach http://127\.0\.0\.1:"):
        await model.respond(_request(USER))


async def test_given_client_has_its_retries_turned_off(server: ChatCompletionsServer) -> None:
    """A `client=` configured with retries still makes one request per call."""
    server.add(Fault(500, "boom"))
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=4) as client:
        with pytest.raises(TransientModelError):
            await OpenAICompatModel("m", client=client).respond(_request(USER))
    assert len(server.requests) == 1


# --- streaming -----------------------------------------------------------------------------

STREAMED = [
    Completion("It is sunny in Lisbon today, 24 degrees."),
    Completion(
        "Checking.",
        tool_calls=(
            ("call_1", "get_weather", {"city": "Lisbon", "note": "a long argument value"}),
            ("call_2", "get_weather", {"city": "Porto"}),
        ),
        cached_tokens=4,
    ),
    Completion(tool_calls=(("call_3", "get_weather", '{"city": Lisb'),)),
    Completion("cut", finish_reason="length"),
]


@pytest.mark.parametrize("answer", STREAMED)
async def test_streamed_reply_equals_unstreamed(
    server: ChatCompletionsServer, answer: Completion
) -> None:
    """Streaming gives the same `Reply` as the JSON answer, and every text piece reaches
    `on_text_delta` in order."""
    server.add(answer, answer)
    pieces: list[str] = []
    plain = await _model(server).respond(_request(USER))
    streamed = await _model(server, stream=True).respond(
        _request(USER, on_text_delta=pieces.append)
    )
    assert streamed == plain
    assert "".join(pieces) == (answer.content or "")
    assert len(pieces) == len(range(0, len(answer.content or ""), 4))
    body = server.requests[1].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


async def test_stream_dropped_midway_is_transient(server: ChatCompletionsServer) -> None:
    """A stream cut off before its end raises `TransientModelError`."""
    server.add(Completion("a fairly long answer that will not arrive", drop_after=3))
    pieces: list[str] = []
    with pytest.raises(TransientModelError) as info:
        await _model(server, stream=True).respond(_request(USER, on_text_delta=pieces.append))
    assert isinstance(info.value.__cause__, openai.APIConnectionError)
    assert pieces == ["a fa", "irly"]


@pytest.mark.parametrize(
    ("event", "transient", "status"),
    [
        ({"message": "engine overloaded", "code": 503}, True, 503),
        ({"message": "prompt too long", "code": 400}, False, 400),
        ({"message": "something broke"}, False, None),
    ],
)
async def test_error_event_in_the_stream(
    server: ChatCompletionsServer, event: dict[str, Any], transient: bool, status: int | None
) -> None:
    """An error event inside the stream is transient when its code is a transient status."""
    server.add(Completion("partial answer", error_event=event))
    with pytest.raises(ModelError) as info:
        await _model(server, stream=True).respond(_request(USER))
    assert isinstance(info.value, TransientModelError) is transient
    assert info.value.status_code == status
    assert str(info.value) == (
        f"agent 'Weather': model 'qwen2.5:7b': error in the stream: {event['message']}"
    )


async def test_stream_fault_before_the_first_chunk(server: ChatCompletionsServer) -> None:
    """A status error on a streamed request maps as it does unstreamed."""
    server.add(Fault(429, "slow down", {"retry-after": "3"}))
    with pytest.raises(TransientModelError) as info:
        await _model(server, stream=True).respond(_request(USER))
    assert info.value.retry_after == 3.0


# --- the key ---------------------------------------------------------------------------------


async def test_key_is_sent_but_never_shown(server: ChatCompletionsServer) -> None:
    """The key reaches the server and appears in no repr, reply, request record or error,
    not even when the server echoes it back."""

    def echo_auth(body: dict[str, Any]) -> Fault:
        return Fault(401, f"bad key {server.requests[-1].headers['authorization']}")

    server.add(Completion("hi"), echo_auth, Drop())
    model = _model(server, api_key=SENTINEL_KEY, stream=False)
    reply = await model.respond(_request(USER))
    assert server.requests[0].headers["authorization"] == f"Bearer {SENTINEL_KEY}"

    errors: list[BaseException] = []
    for _ in range(2):
        with pytest.raises(ModelError) as info:
            await model.respond(_request(USER))
        errors.append(info.value)

    assert str(errors[0]) == "agent 'Weather': model 'qwen2.5:7b': HTTP 401: bad key Bearer ***"
    shown = [
        repr(model),
        str(model.__dict__.get("base_url")),
        reply.model_dump_json(),
        json.dumps(model.request_params(_request(USER))),
        *(str(e) for e in errors),
        *(repr(e) for e in errors),
        *(str(e.__cause__) for e in errors),
        *(repr(e.__cause__) for e in errors),
    ]
    for text in shown:
        assert SENTINEL_KEY not in text


async def test_key_from_environment(
    server: ChatCompletionsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without `api_key`, `OPENAI_API_KEY` is used; without either, a placeholder."""
    server.add(Completion("a"), Completion("b"))
    await _model(server).respond(_request(USER))
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL_KEY)
    await _model(server).respond(_request(USER))
    assert [r.headers["authorization"] for r in server.requests] == [
        "Bearer not-needed",
        f"Bearer {SENTINEL_KEY}",
    ]


# --- construction ----------------------------------------------------------------------------


def test_repr_skips_defaults() -> None:
    """The repr shows the model, the URL with its credentials redacted, and only non-default
    options."""
    model = OpenAICompatModel("m", base_url="http://u:secret@localhost:8000/v1?k=1")
    assert repr(model) == "OpenAICompatModel('m', base_url='http://***@localhost:8000/v1?k=1')"
    model = OpenAICompatModel("m", base_url="http://h/v1", stream=True, tools_mode="prompt")
    assert repr(model) == (
        "OpenAICompatModel('m', base_url='http://h/v1', stream=True, tools_mode='prompt')"
    )
    assert model.name == "m"


def test_bad_arguments() -> None:
    """A missing `base_url` and an unknown `tools_mode` are caught at construction."""
    with pytest.raises(ValueError, match="needs `base_url=`"):
        OpenAICompatModel("m")
    with pytest.raises(ValueError, match="`tools_mode` must be"):
        OpenAICompatModel("m", base_url="http://h/v1", tools_mode="native")  # type: ignore[arg-type]


def test_import_error_names_the_extra() -> None:
    """Without the SDK, importing the module fails with one message naming the extra."""
    code = (
        "import sys; sys.modules['openai'] = None\n"
        "try:\n"
        "    import thena_nb.models.openai_compat\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install thena_nb[openai]" in out.stdout


# --- end to end: workflows on OpenAICompatModel ------------------------------------------------

FAST_RETRY = RetryPolicy(initial_delay=0.01, max_delay=0.02, jitter=False)


def _workflow(model: OpenAICompatModel, *, max_iterations: int = 5) -> Workflow:
    agent = Agent("Weather", model=model, system="You are a weather bot.", tools=[get_weather])
    step = loop(steps=[agent], until=until_answered, max_iterations=max_iterations)
    return Workflow("forecast", [step], retry=FAST_RETRY)


async def test_workflow_with_native_and_rescued_calls(server: ChatCompletionsServer) -> None:
    """One run with a native call, then a call written as text that the executor rescues:
    each turn records its source, and the requests carry the native id as `tool_calls` and
    the rescued result as user text."""
    written = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Porto"}}\n</tool_call>'
    server.add(
        Completion(tool_calls=(("call_1", "get_weather", {"city": "Lisbon"}),)),
        Completion(written),
        Completion("Sunny in both."),
    )

    run = await _workflow(_model(server)).arun("Lisbon and Porto?")

    assert run.status == "finished"
    assert run.output == "Sunny in both."
    assert [t.info.tool_call_source for t in run.turns] == ["native", "rescued", None]
    assert [t.info.response for t in run.turns] == ["", written, "Sunny in both."]
    native, rescued = run.turns[0].tool_calls[0], run.turns[1].tool_calls[0]
    assert (native.id, native.source, native.ok, native.result) == (
        "call_1",
        "native",
        True,
        "sunny in Lisbon",
    )
    assert (rescued.source, rescued.ok, rescued.result) == ("rescued", True, "sunny in Porto")
    assert server.requests[2].messages == [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "Lisbon and Porto?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny in Lisbon"},
        {"role": "assistant", "content": written},
        {"role": "user", "content": "Your call to `get_weather` returned:\nsunny in Porto"},
    ]
    assert all("tools" in r.body for r in server.requests)


async def test_workflow_in_prompt_mode_against_a_server_without_tools() -> None:
    """With `tools_mode="prompt"` a server that rejects tools runs the whole tool loop: every
    call comes back through rescue."""
    written = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Faro"}}\n</tool_call>'
    script = [Completion(written), Completion("Sunny in Faro.")]
    with ChatCompletionsServer(script, tools_supported=False) as server:
        run = await _workflow(_model(server, tools_mode="prompt")).arun("Faro?")

    assert run.status == "finished"
    assert [t.info.tool_call_source for t in run.turns] == ["rescued", None]
    assert run.turns[0].tool_calls[0].result == "sunny in Faro"
    assert all("tools" not in r.body for r in server.requests)
    assert server.requests[1].messages[1:] == [
        {"role": "user", "content": "Faro?"},
        {"role": "assistant", "content": written},
        {"role": "user", "content": "Your call to `get_weather` returned:\nsunny in Faro"},
    ]


async def test_workflow_malformed_arguments_fail_the_call(server: ChatCompletionsServer) -> None:
    """A native call with broken JSON arguments is a failed tool call: the loop counts it, and
    the error observation that goes back shows the raw text."""
    server.add(
        Completion(tool_calls=(("call_1", "get_weather", '{"city": Lisbon'),)),
        Completion(tool_calls=(("call_2", "get_weather", '{"city": "Lisbon"}'),)),
        Completion("Sunny."),
    )

    run = await _workflow(_model(server)).arun("Lisbon?")

    first, second, _ = run.turns
    assert (first.info.tool_error, first.info.tool_call_source) == (True, "native")
    assert first.consecutive_fails == 1
    assert (second.info.tool_error, second.consecutive_fails) == (False, 0)
    error = first.tool_calls[0].error
    assert error is not None
    assert error.startswith(
        "Error: invalid arguments for tool 'get_weather' "
        '{"_raw_arguments": "{\\"city\\": Lisbon"}:'
    )
    assert server.requests[1].messages[-2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "arguments": '{"_raw_arguments": "{\\"city\\": Lisbon"}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": error},
    ]


async def test_workflow_retries_transient_faults(server: ChatCompletionsServer) -> None:
    """A 503 and a dropped connection are retried by the executor and counted as attempts of
    the same turn (S25)."""
    server.add(Fault(503, "overloaded"), Drop(), Completion("Sunny."))
    run = await _workflow(_model(server)).arun("Lisbon?")
    assert run.status == "finished"
    assert [t.attempts for t in run.turns] == [2 + 1]
    assert run.usage.model_calls == 3
    assert len(server.requests) == 3


async def test_workflow_streams_text_deltas(server: ChatCompletionsServer) -> None:
    """A streaming model sends each text piece to the session's subscribers as it arrives."""
    server.add(Completion("It is sunny in Lisbon."))
    session = _workflow(_model(server, stream=True)).session("Lisbon?")
    pieces: list[str] = []
    session.subscribe(lambda e: pieces.append(e.text or "") if e.kind == "text_delta" else None)
    run = await session.run()
    assert run.output == "It is sunny in Lisbon."
    assert "".join(pieces) == "It is sunny in Lisbon."
    assert len(pieces) > 1


async def test_workflow_records_never_hold_the_key(server: ChatCompletionsServer) -> None:
    """A run that ends on a server error echoing the key keeps it out of the error, the
    recorded run, its JSON and its HTML."""

    def echo_auth(body: dict[str, Any]) -> Fault:
        return Fault(403, f"key {server.requests[-1].headers['authorization']} is not allowed")

    server.add(Completion(tool_calls=(("call_1", "get_weather", {"city": "Lisbon"}),)), echo_auth)
    wf = _workflow(_model(server, api_key=SENTINEL_KEY))
    with pytest.raises(ModelError) as info:
        await wf.arun("Lisbon?")
    run = info.value.run  # type: ignore[attr-defined]
    assert run.status == "failed"
    assert len(run.turns) == 1
    shown = [str(info.value), repr(info.value), run.to_json(), run._repr_html_(), repr(wf)]
    assert "Bearer ***" in str(info.value)
    for text in shown:
        assert SENTINEL_KEY not in text


def test_workflow_run_twice_from_sync_code(server: ChatCompletionsServer) -> None:
    """`wf.run()` runs each run on its own event loop; the same model works in both."""
    server.add(Completion("one"), Completion("two"))
    wf = _workflow(_model(server))
    assert [wf.run("a").output, wf.run("b").output] == ["one", "two"]
