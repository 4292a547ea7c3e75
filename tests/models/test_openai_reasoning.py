"""Reasoning through `OpenAICompatModel`, the real `openai` SDK and the 127.0.0.1 chat
completions server: `reasoning_content` / `reasoning` fields and a leading `<think>` block
become `reasoning`, never the response, never searched for calls, never sent back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from chat_completions_server import ChatCompletionsServer, Completion

from thena_nb import Agent, Event, Message, Workflow, loop, tool, until_answered
from thena_nb.models import ModelRequest
from thena_nb.models.openai_compat import OpenAICompatModel, split_leading_think

pytestmark = pytest.mark.anyio

THOUGHT = "They ask about Lisbon; the weather tool answers that."
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Lisbon"}}</tool_call>'


@pytest.fixture
def server() -> Iterator[ChatCompletionsServer]:
    with ChatCompletionsServer() as s:
        yield s


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


def _model(server: ChatCompletionsServer, **kwargs: Any) -> OpenAICompatModel:
    return OpenAICompatModel("qwen3:8b", base_url=server.base_url, timeout=5.0, **kwargs)


def _request(content: str = "Weather in Lisbon?") -> ModelRequest:
    return ModelRequest(agent="Weather", messages=[Message(role="user", content=content)])


def _workflow(model: OpenAICompatModel) -> Workflow:
    agent = Agent("Weather", model=model, tools=[get_weather])
    return Workflow("forecast", [loop(steps=[agent], until=until_answered, max_iterations=3)])


STREAM = pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])


# --- replies -------------------------------------------------------------------------------


@STREAM
@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_field_is_reasoning_not_text(
    server: ChatCompletionsServer, stream: bool, field: str
) -> None:
    server.add(Completion("Sunny.", reasoning=THOUGHT, reasoning_field=field, reasoning_tokens=12))
    shown: list[str] = []
    request = _request().model_copy(update={"on_text_delta": shown.append})
    reply = await _model(server, stream=stream).respond(request)
    assert (reply.text, reply.reasoning, reply.reasoning_tokens) == ("Sunny.", THOUGHT, 12)
    if stream:
        assert "".join(shown) == "Sunny."


@STREAM
async def test_leading_think_block_is_reasoning_not_text(
    server: ChatCompletionsServer, stream: bool
) -> None:
    """A `<think>` block at the start of the content is reasoning; streamed text deltas
    never show it (they are held back until the block closes)."""
    server.add(Completion(f"<think>\n{THOUGHT}\n</think>\n\nSunny in Lisbon."))
    shown: list[str] = []
    request = _request().model_copy(update={"on_text_delta": shown.append})
    reply = await _model(server, stream=stream).respond(request)
    assert (reply.text, reply.reasoning) == ("Sunny in Lisbon.", THOUGHT)
    if stream:
        assert "".join(shown) == "Sunny in Lisbon."


@STREAM
async def test_field_and_think_block_together(server: ChatCompletionsServer, stream: bool) -> None:
    server.add(Completion("<think>Second thought.</think>Sunny.", reasoning=THOUGHT))
    reply = await _model(server, stream=stream).respond(_request())
    assert (reply.text, reply.reasoning) == ("Sunny.", f"{THOUGHT}\n\nSecond thought.")


@STREAM
async def test_text_that_only_looks_like_a_tag_is_shown_whole(
    server: ChatCompletionsServer, stream: bool
) -> None:
    """Text starting with `<th…` that is no think block is held back only until that is
    clear, then shown whole."""
    server.add(Completion("<th>is a table header</th>"))
    shown: list[str] = []
    request = _request().model_copy(update={"on_text_delta": shown.append})
    reply = await _model(server, stream=stream).respond(request)
    assert (reply.text, reply.reasoning) == ("<th>is a table header</th>", None)
    if stream:
        assert "".join(shown) == reply.text


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("Plain.", (None, "Plain.")),
        ("<think>a</think>b", ("a", "b")),
        ("  <thinking>a</thinking>\nb", ("a", "b")),
        ("<think>\n\n</think>\n\nb", (None, "b")),
        ("<think>cut off while thinking", ("cut off while thinking", "")),
        ("opened by the template</think>\nb", ("opened by the template", "b")),
        ("b <think>later</think> c", (None, "b <think>later</think> c")),
    ],
)
def test_split_leading_think(content: str, expected: tuple[str | None, str]) -> None:
    assert split_leading_think(content) == expected


# --- end to end through a workflow ---------------------------------------------------------


@STREAM
@pytest.mark.parametrize("where", ["think block", "reasoning field"])
async def test_a_call_written_only_in_reasoning_is_not_rescued(
    server: ChatCompletionsServer, stream: bool, where: str
) -> None:
    """A call drafted in the reasoning is no action: rescue never sees it, and the response
    holds the answer alone."""
    if where == "think block":
        server.add(Completion(f"<think>I could write {CALL}.</think>It is sunny, I know."))
    else:
        server.add(Completion("It is sunny, I know.", reasoning=f"I could write {CALL}."))
    run = await _workflow(_model(server, stream=stream)).arun("Weather in Lisbon?")
    turn = run.turns[0]
    assert len(run.turns) == 1
    assert turn.tool_calls == []
    assert turn.info.response == "It is sunny, I know."
    assert turn.reasoning == f"I could write {CALL}."
    assert CALL not in json.dumps(run.history[1].model_dump())


@pytest.mark.parametrize("tools_mode", ["auto", "prompt"])
async def test_reasoning_is_never_sent_back(server: ChatCompletionsServer, tools_mode: str) -> None:
    """A turn that reasoned and called a tool: its reasoning stays out of the response and
    of the next request; the call written after the reasoning is rescued in prompt mode."""
    if tools_mode == "auto":
        first = Completion(
            f"<think>{THOUGHT}</think>",
            tool_calls=(("call_1", "get_weather", {"city": "Lisbon"}),),
        )
    else:
        first = Completion(f"<think>{THOUGHT}</think>\n{CALL}")
    server.add(first, Completion("Sunny.", reasoning="The tool said sunny."))
    run = await _workflow(_model(server, tools_mode=tools_mode)).arun("Weather in Lisbon?")
    assert [t.info.called_tool for t in run.turns] == [True, False]
    assert run.turns[0].tool_calls[0].result == "sunny in Lisbon"
    assert [t.reasoning for t in run.turns] == [THOUGHT, "The tool said sunny."]
    assert all(THOUGHT not in t.info.response for t in run.turns)
    assert THOUGHT not in json.dumps(server.requests[1].body)
    assert run.output == "Sunny."


async def test_streamed_reasoning_never_reaches_text_deltas(server: ChatCompletionsServer) -> None:
    server.add(Completion(f"<think>{THOUGHT}</think>Sunny.", reasoning="Field thought."))
    agent = Agent("Weather", model=_model(server, stream=True))
    session = Workflow("forecast", [agent]).session("Weather in Lisbon?")
    events: list[Event] = []
    session.subscribe(events.append)
    run = await session.run()
    deltas = [event.text for event in events if event.kind == "text_delta"]
    assert "".join(deltas) == "Sunny." == run.output  # type: ignore[arg-type]
    assert run.turns[0].reasoning == f"Field thought.\n\n{THOUGHT}"
