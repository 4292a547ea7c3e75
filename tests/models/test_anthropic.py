"""`AnthropicModel` through the real `anthropic` SDK against a Messages API server on
127.0.0.1 (`messages_api_server.py`): replies, streaming, every fault, caching, the key."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import anthropic
import pytest
from messages_api_server import (
    Answer,
    MessagesAPIServer,
    drop,
    raw,
    slow,
    status,
    stream_error,
    text,
    tool_use,
    tool_uses,
    truncate,
    validate,
)

from thena_nb.core.records.errors import ModelError, TransientModelError
from thena_nb.core.records.model import Model, ModelRequest, Reply, ToolSpec
from thena_nb.core.records.types import Message, ToolCall
from thena_nb.models.anthropic import AnthropicModel

pytestmark = pytest.mark.anyio

SENTINEL_KEY = "sk-ant-sentinel-7c41e9d02b"
ADD = ToolSpec(
    name="add",
    description="Add two numbers.",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)
LOOKUP = ToolSpec(name="lookup", description="Look a word up.", parameters={"type": "object"})


def _model(server: MessagesAPIServer, **options: Any) -> AnthropicModel:
    return AnthropicModel("claude-test", base_url=server.base_url, api_key="test-key", **options)


def _request(content: str = "What is 1 + 2?", **fields: Any) -> ModelRequest:
    fields.setdefault("agent", "Calculator")
    return ModelRequest(messages=[Message(role="user", content=content)], **fields)


# --- replies ---------------------------------------------------------------------------


async def test_a_message_with_only_its_required_fields(api_server: MessagesAPIServer) -> None:
    """The body is read as it came: the fields a message may leave out (stop reason, cache
    counts) default, blocks of kinds the adapter does not use are passed over, and a JSON
    message sent under another content type is read all the same."""
    body = {
        "content": [
            {"type": "text", "text": "It is "},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
            {"type": "text", "text": "3."},
            {"type": "tool_use", "id": "toolu_9", "name": "add", "input": "not an object"},
        ],
        "usage": {"input_tokens": 5, "output_tokens": 2},
    }
    api_server.script(raw(json.dumps(body), content_type="text/plain"))
    reply = await _model(api_server).respond(_request())
    assert reply == Reply(
        text="It is 3.",
        tool_calls=[ToolCall(id="toolu_9", name="add", arguments={})],
        input_tokens=5,
        output_tokens=2,
    )


async def test_text_reply(api_server: MessagesAPIServer) -> None:
    """A text answer becomes `Reply.text` with its stop reason and every usage count."""
    api_server.script(
        text(
            "It is 3.",
            input_tokens=42,
            output_tokens=7,
            cache_read_tokens=30,
            cache_write_tokens=12,
        )
    )
    reply = await _model(api_server).respond(_request())
    assert reply.response_id is not None and reply.response_id.startswith("msg_")
    assert reply == Reply(
        text="It is 3.",
        finish_reason="end_turn",
        input_tokens=42,
        output_tokens=7,
        cache_read_tokens=30,
        cache_write_tokens=12,
        response_model=_model(api_server).name,
        response_id=reply.response_id,
    )


async def test_the_reply_keeps_the_model_that_answered(api_server: MessagesAPIServer) -> None:
    """An alias asked, a dated snapshot answering: the reply (and so the turn, its frame and
    its `chat` span) keeps the snapshot; the model asked stays the adapter's name."""
    api_server.script(text("Hi.", model="claude-sonnet-4-5-20250929"))
    api_server.script(text("Hi.", model="claude-sonnet-4-5-20250929"))
    model = _model(api_server)
    assert (await model.respond(_request())).response_model == "claude-sonnet-4-5-20250929"
    streamed = await _model(api_server, stream=True).respond(_request())
    assert streamed.response_model == "claude-sonnet-4-5-20250929"
    assert streamed.response_model != model.name
    assert api_server.rejected == []


async def test_tool_use_reply(api_server: MessagesAPIServer) -> None:
    """`tool_use` blocks become native `ToolCall`s with the API's ids, in order; text blocks
    are joined."""
    api_server.script(
        Answer(
            content=[
                {"type": "text", "text": "Adding. "},
                {"type": "tool_use", "id": "toolu_A1", "name": "add", "input": {"a": 1, "b": 2}},
                {"type": "text", "text": "And looking up."},
                {"type": "tool_use", "id": "toolu_B2", "name": "lookup", "input": {"word": "x"}},
            ],
            stop_reason="tool_use",
        )
    )
    reply = await _model(api_server).respond(_request(tools=[ADD, LOOKUP]))
    assert reply.text == "Adding. And looking up."
    assert reply.finish_reason == "tool_use"
    assert [(c.id, c.name, c.arguments, c.source) for c in reply.tool_calls] == [
        ("toolu_A1", "add", {"a": 1, "b": 2}, "native"),
        ("toolu_B2", "lookup", {"word": "x"}, "native"),
    ]
    assert all(call.ok is None for call in reply.tool_calls)


async def test_request_carries_model_system_tools_and_max_tokens(
    api_server: MessagesAPIServer,
) -> None:
    """The request names the model, `max_tokens`, the system prompt and each tool with its
    `input_schema`."""
    api_server.script(text("ok"))
    await _model(api_server, cache=False).respond(
        _request(system="You add numbers.", tools=[ADD], max_tokens=77)
    )
    body = api_server.bodies[0]
    assert body["model"] == "claude-test"
    assert body["max_tokens"] == 77
    assert body["system"] == "You add numbers."
    assert body["tools"] == [
        {"name": "add", "description": "Add two numbers.", "input_schema": ADD.parameters}
    ]
    assert "stream" not in body


ANSWERS = {
    "text": text("The answer is three, as expected."),
    "tool": tool_use("add", {"a": 1, "b": 2}, text="Let me add those."),
    "tools only": tool_uses([("add", {"a": 1, "b": 2}, None), ("lookup", {"word": "é"}, None)]),
    "cache usage": text("Cached.", cache_read_tokens=100, cache_write_tokens=20),
    "max_tokens": text("Cut sh", stop_reason="max_tokens"),
}


@pytest.mark.parametrize("answer", ANSWERS.values(), ids=ANSWERS.keys())
async def test_streamed_reply_equals_json_reply(
    api_server: MessagesAPIServer, answer: Answer
) -> None:
    """`stream=True` asks for SSE, calls `on_text_delta` with each piece of text as it
    arrives, and ends with the same `Reply` as a JSON request."""
    api_server.script(answer, answer)
    deltas: list[str] = []
    json_reply = await _model(api_server).respond(_request(tools=[ADD, LOOKUP]))
    streamed = await _model(api_server, stream=True).respond(
        _request(tools=[ADD, LOOKUP], on_text_delta=deltas.append)
    )
    assert streamed.response_id != json_reply.response_id  # each answer has its own id
    assert streamed.model_copy(update={"response_id": None}) == json_reply.model_copy(
        update={"response_id": None}
    )
    assert "".join(deltas) == json_reply.text
    if len(json_reply.text.split()) > 1:
        assert len(deltas) > 1
    assert [body.get("stream") for body in api_server.bodies] == [None, True]


async def test_stream_without_callback(api_server: MessagesAPIServer) -> None:
    """Streaming works when the request has no `on_text_delta`."""
    api_server.script(text("Quietly streamed."))
    reply = await _model(api_server, stream=True).respond(_request())
    assert reply.text == "Quietly streamed."


# --- faults ----------------------------------------------------------------------------

TRANSIENT = {
    "408": (status(408), 408, None),
    "409": (status(409), 409, None),
    "429 retry-after": (status(429, headers={"retry-after": "2"}), 429, 2.0),
    "429 retry-after-ms": (
        status(429, headers={"retry-after-ms": "1500", "retry-after": "9"}),
        429,
        1.5,
    ),
    "429 retry-after 0": (status(429, headers={"retry-after": "0"}), 429, 0.0),
    "500": (status(500), 500, None),
    "502": (status(502, error_type="api_error"), 502, None),
    "503": (status(503, headers={"retry-after": "7"}), 503, 7.0),
    "529 overloaded": (status(529, "Overloaded"), 529, None),
    "400 with x-should-retry": (status(400, headers={"x-should-retry": "true"}), 400, None),
}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(("fault", "code", "retry_after"), TRANSIENT.values(), ids=TRANSIENT.keys())
async def test_transient_statuses(
    api_server: MessagesAPIServer, fault: Any, code: int, retry_after: float | None, stream: bool
) -> None:
    """408, 409, 429, 5xx and 529 raise `TransientModelError` with the status, the server's
    `retry-after-ms` / `retry-after` in seconds, the agent and the API's message; the SDK
    does not retry on its own (one request)."""
    api_server.script(fault)
    with pytest.raises(TransientModelError) as info:
        await _model(api_server, stream=stream).respond(_request(agent="Planner"))
    error = info.value
    assert error.status_code == code
    assert error.retry_after == retry_after
    assert error.model_name == "claude-test"
    assert "'Planner'" in str(error)
    assert str(code) in str(error)
    assert fault.message in str(error)
    assert isinstance(error.__cause__, anthropic.APIStatusError)
    assert len(api_server.requests) == 1


FINAL = {
    "400": (status(400, "messages.0: something is off"), 400, "invalid_request_error"),
    "401": (status(401, "invalid x-api-key"), 401, "ANTHROPIC_API_KEY"),
    "403": (status(403, "not allowed"), 403, "permission_error"),
    "404": (status(404, "model: claude-nope"), 404, "Check the model name"),
    "413": (status(413, "request too large"), 413, "keep_first_and_recent"),
    "500 with x-should-retry false": (
        status(500, "do not retry", headers={"x-should-retry": "false"}),
        500,
        "api_error",
    ),
}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(("fault", "code", "hint"), FINAL.values(), ids=FINAL.keys())
async def test_final_statuses(
    api_server: MessagesAPIServer, fault: Any, code: int, hint: str, stream: bool
) -> None:
    """400, 401, 403, 404 and 413 raise a final `ModelError` naming the agent, the status
    and the API's own message, with the SDK's exception as `__cause__`."""
    api_server.script(fault)
    with pytest.raises(ModelError) as info:
        await _model(api_server, stream=stream).respond(_request(agent="Reviewer"))
    error = info.value
    assert not isinstance(error, TransientModelError)
    assert error.status_code == code
    message = str(error)
    assert message.startswith("agent 'Reviewer': model 'claude-test': ")
    assert f"answered {code}" in message
    assert fault.message in message
    assert hint in message
    assert isinstance(error.__cause__, anthropic.APIStatusError)
    assert error.__cause__.status_code == code


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_slow_reply_times_out(api_server: MessagesAPIServer, stream: bool) -> None:
    """A reply slower than `timeout` is a transient timeout."""
    api_server.script(slow(5.0))
    model = _model(api_server, timeout=0.3, stream=stream)
    with pytest.raises(TransientModelError, match=r"did not answer within 0\.3s") as info:
        await model.respond(_request(agent="Slowpoke"))
    assert info.value.status_code is None
    assert info.value.retry_after is None
    assert "'Slowpoke'" in str(info.value)
    assert isinstance(info.value.__cause__, anthropic.APITimeoutError)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_dropped_connection(api_server: MessagesAPIServer, stream: bool) -> None:
    """A connection cut mid-reply is transient, and the next call works."""
    api_server.script(drop(), text("Second time lucky."))
    model = _model(api_server, stream=stream)
    with pytest.raises(TransientModelError, match="connection failed or dropped") as info:
        await model.respond(_request(agent="Fetcher"))
    assert "'Fetcher'" in str(info.value)
    assert info.value.__cause__ is not None
    assert (await model.respond(_request())).text == "Second time lucky."


async def test_stream_ending_before_message_stop(api_server: MessagesAPIServer) -> None:
    """A stream that ends cleanly but before `message_stop` is an incomplete reply: transient."""
    api_server.script(truncate())
    with pytest.raises(TransientModelError, match="before `message_stop`"):
        await _model(api_server, stream=True).respond(_request())


async def test_error_event_inside_stream(api_server: MessagesAPIServer) -> None:
    """An `overloaded_error` event inside a 200 stream is a transient 529."""
    api_server.script(stream_error("overloaded_error", "Overloaded"))
    with pytest.raises(TransientModelError) as info:
        await _model(api_server, stream=True).respond(_request())
    assert info.value.status_code == 529
    assert "Overloaded" in str(info.value)


async def test_unreachable_server_is_transient() -> None:
    """Nothing listening at `base_url` is a transient connection error."""
    with MessagesAPIServer() as server:
        url = server.base_url
    model = AnthropicModel("claude-test", base_url=url, api_key="k", timeout=2.0)
    with pytest.raises(TransientModelError, match="connection failed"):
        await model.respond(_request())


async def test_given_client_has_its_retries_turned_off(api_server: MessagesAPIServer) -> None:
    """A `client=` configured with retries is used without them: the executor retries."""
    api_server.script(status(529), status(529), text("late"))
    client = anthropic.AsyncAnthropic(api_key="k", base_url=api_server.base_url, max_retries=5)
    model = AnthropicModel("claude-test", client=client)
    with pytest.raises(TransientModelError):
        await model.respond(_request())
    assert len(api_server.requests) == 1
    await client.close()


def test_a_fresh_event_loop_per_run_works(api_server: MessagesAPIServer) -> None:
    """`wf.run()` may start a new event loop each time; the model still answers in each."""
    api_server.script(text("one"), text("two"))
    model = _model(api_server)
    first = asyncio.run(model.respond(_request()))
    second = asyncio.run(model.respond(_request()))
    assert (first.text, second.text) == ("one", "two")


# --- caching ---------------------------------------------------------------------------


def _breakpoints(body: dict[str, Any]) -> list[str]:
    found = [
        f"tools.{i}" for i, tool in enumerate(body.get("tools", [])) if "cache_control" in tool
    ]
    system = body.get("system")
    if isinstance(system, list):
        found += [f"system.{i}" for i, block in enumerate(system) if "cache_control" in block]
    for m, message in enumerate(body["messages"]):
        found += [
            f"messages.{m}.content.{b}"
            for b, block in enumerate(message["content"])
            if "cache_control" in block
        ]
    return found


async def test_cache_breakpoints_on_the_stable_prefix(api_server: MessagesAPIServer) -> None:
    """`cache=True` marks the last tool, the system prompt and the last block of the history
    as ephemeral breakpoints: three, under the API's limit of four."""
    api_server.script(text("ok"))
    history = [
        Message(role="user", content="Add 1 and 2."),
        Message(
            role="assistant",
            content="",
            agent="Calculator",
            tool_calls=[ToolCall(id="toolu_1", name="add", arguments={"a": 1, "b": 2})],
        ),
        Message(role="tool", content="3", agent="Calculator", tool_call_id="toolu_1"),
    ]
    request = ModelRequest(agent="Calculator", system="Add.", messages=history, tools=[LOOKUP, ADD])
    await _model(api_server).respond(request)
    body = api_server.bodies[0]
    assert _breakpoints(body) == ["tools.1", "system.0", "messages.2.content.0"]
    assert body["system"] == [
        {"type": "text", "text": "Add.", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["messages"][2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": "3",
        "cache_control": {"type": "ephemeral"},
    }
    assert api_server.rejected == []


async def test_cache_off_sends_no_breakpoints(api_server: MessagesAPIServer) -> None:
    """`cache=False` sends no `cache_control` anywhere and the system prompt as a string."""
    api_server.script(text("ok"))
    await _model(api_server, cache=False).respond(_request(system="Add.", tools=[ADD]))
    body = api_server.bodies[0]
    assert _breakpoints(body) == []
    assert "cache_control" not in json.dumps(body)


# --- the API key -----------------------------------------------------------------------


def test_repr_skips_defaults_and_never_shows_the_key() -> None:
    """The repr shows the model and the options that differ from the defaults."""
    assert repr(AnthropicModel("claude-sonnet-4-5")) == "AnthropicModel('claude-sonnet-4-5')"
    assert (
        repr(AnthropicModel("claude-sonnet-4-5", stream=True, api_key=SENTINEL_KEY))
        == "AnthropicModel('claude-sonnet-4-5', stream=True)"
    )
    assert repr(AnthropicModel("m", base_url="http://127.0.0.1:1", timeout=5.0, cache=False)) == (
        "AnthropicModel('m', base_url='http://127.0.0.1:1', timeout=5.0, cache=False)"
    )
    assert AnthropicModel("claude-sonnet-4-5").name == "claude-sonnet-4-5"
    assert isinstance(AnthropicModel("claude-sonnet-4-5"), Model)


async def test_missing_key_is_a_clear_model_error() -> None:
    """Without `api_key=` and `ANTHROPIC_API_KEY` the first call says how to set the key;
    building the model needs no key."""
    model = AnthropicModel("claude-test", base_url="http://127.0.0.1:9")
    with pytest.raises(
        ModelError, match="Set the `ANTHROPIC_API_KEY` environment variable"
    ) as info:
        await model.respond(_request(agent="Keyless"))
    assert not isinstance(info.value, TransientModelError)
    assert "'Keyless'" in str(info.value)


async def test_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ANTHROPIC_API_KEY` is the key when none is given, read at the first call."""
    with MessagesAPIServer(api_key=SENTINEL_KEY) as server:
        server.script(text("authorised"))
        model = AnthropicModel("claude-test", base_url=server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", SENTINEL_KEY)
        assert (await model.respond(_request())).text == "authorised"


async def test_sentinel_key_appears_nowhere() -> None:
    """The key reaches the server, yet no repr, reply, error message, error repr or cause
    text contains it."""
    with MessagesAPIServer(api_key=SENTINEL_KEY) as server:
        model = AnthropicModel("claude-test", base_url=server.base_url, api_key=SENTINEL_KEY)
        wrong = AnthropicModel("claude-test", base_url=server.base_url, api_key=SENTINEL_KEY + "x")
        server.script(tool_use("add", {"a": 1, "b": 2}), status(529), status(400, "bad"))
        reply = await model.respond(_request(tools=[ADD]))
        texts = [repr(model), str(model), repr(wrong), reply.model_dump_json(), repr(reply)]
        for failing in (model, model, wrong):
            with pytest.raises(ModelError) as info:
                await failing.respond(_request(tools=[ADD]))
            error = info.value
            texts += [str(error), repr(error), str(error.__cause__), repr(error.__cause__)]
            texts += [str(getattr(error.__cause__, "body", ""))]
        assert info.value.status_code == 401
    assert [request.status for request in server.requests] == [200, 529, 400, 401]
    for text_ in texts:
        assert SENTINEL_KEY not in text_


def test_import_error_names_the_package() -> None:
    """Without the SDK, importing the adapter fails with one message saying what to install."""
    code = (
        "import sys; sys.modules['anthropic'] = None\n"
        "try:\n"
        "    import thena_nb.models.anthropic\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "`pip install anthropic`" in result.stdout, result.stderr


# --- the test server itself ------------------------------------------------------------


def _body(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 5, "messages": list(messages)}


_ASK_T1 = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
}
INVALID = {
    "no model": (
        {"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
        "model: Field required",
    ),
    "unknown field": ({**_body({"role": "user", "content": "a"}), "temprature": 1}, "Extra inputs"),
    "first is assistant": (
        _body({"role": "assistant", "content": "hi"}),
        'first message must use the "user" role',
    ),
    "roles repeat": (
        _body({"role": "user", "content": "a"}, {"role": "user", "content": "b"}),
        "roles must alternate",
    ),
    "empty text": (
        _body({"role": "user", "content": [{"type": "text", "text": ""}]}),
        "text content blocks must be non-empty",
    ),
    "blank text": (
        _body({"role": "user", "content": [{"type": "text", "text": " \n"}]}),
        "non-whitespace",
    ),
    "unanswered tool_use": (
        _body({"role": "user", "content": "a"}, _ASK_T1, {"role": "user", "content": "b"}),
        "`tool_use` ids were found without `tool_result` blocks immediately after: t1",
    ),
    "tool_use last": (
        _body({"role": "user", "content": "a"}, _ASK_T1),
        "`tool_use` ids were found without `tool_result` blocks immediately after: t1",
    ),
    "stray tool_result": (
        _body({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9"}]}),
        "unexpected `tool_use_id` found in `tool_result` blocks: t9",
    ),
    "tool_result after text": (
        _body(
            {"role": "user", "content": "a"},
            _ASK_T1,
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "first"},
                    {"type": "tool_result", "tool_use_id": "t1", "content": "x"},
                ],
            },
        ),
        "`tool_result` blocks must come before any other content",
    ),
    "trailing whitespace in a final assistant message": (
        _body({"role": "user", "content": "a"}, {"role": "assistant", "content": "b "}),
        "final assistant content cannot end with trailing whitespace",
    ),
    "five breakpoints": (
        _body(
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": str(i), "cache_control": {"type": "ephemeral"}}
                    for i in range(5)
                ],
            }
        ),
        "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    ),
}


@pytest.mark.parametrize(("body", "problem"), INVALID.values(), ids=INVALID.keys())
def test_server_rejects_what_the_api_rejects(body: dict[str, Any], problem: str) -> None:
    """The server's checks are what makes its 200s evidence that a request is valid, so
    they are tested on their own: each invalid body gets the API's message."""
    message = validate(body)
    assert message is not None
    assert problem in message


def test_server_accepts_a_valid_round_trip() -> None:
    """The same checks pass a well-formed tool round trip."""
    answer = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]}
    assert validate(_body({"role": "user", "content": "a"}, _ASK_T1, answer)) is None


async def test_server_answers_invalid_requests_with_an_api_shaped_400(
    api_server: MessagesAPIServer,
) -> None:
    """An invalid request sent through the SDK gets a 400 `invalid_request_error`, which
    `AnthropicModel` reports as a final error, and consumes no scripted reply."""
    api_server.script(text("unused"))
    client = anthropic.AsyncAnthropic(api_key="k", base_url=api_server.base_url, max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as info:
        await client.messages.create(
            model="m",
            max_tokens=5,
            messages=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
        )
    await client.close()
    assert info.value.body == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": 'messages: roles must alternate between "user" and "assistant", '
            'but found multiple "user" roles in a row',
        },
    }
    assert api_server.remaining() == 1
    assert len(api_server.rejected) == 1
