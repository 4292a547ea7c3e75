"""Extended thinking through `AnthropicModel`, the real `anthropic` SDK and the 127.0.0.1
Messages API server, which rejects a continuation that drops, reorders or alters the
thinking of a turn that called tools, as the real API does."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from messages_api_server import (
    MessagesAPIServer,
    redacted_thinking_block,
    text,
    thinking,
    thinking_block,
    tool_use,
    validate,
)
from test_anthropic_request import AGENTS, TOOLS, histories

from thena_nb import Agent, Event, Run, Workflow, loop, tool, until_answered
from thena_nb.core.records.errors import ModelError
from thena_nb.core.records.model import ModelRequest
from thena_nb.core.records.types import Message, ToolCall
from thena_nb.models.anthropic import CONTINUE_PROMPT, AnthropicModel, request_params
from thena_nb.store import SqliteRunStore

pytestmark = pytest.mark.anyio

THINKING = {"type": "enabled", "budget_tokens": 2048}
KEY = "sk-ant-thinking-sentinel-51d0"
THOUGHT = "The user wants 2 + 3; the add tool does that."
RESCUABLE = '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _model(server: MessagesAPIServer, **options: Any) -> AnthropicModel:
    options.setdefault("thinking", THINKING)
    return AnthropicModel("claude-test", base_url=server.base_url, api_key=KEY, **options)


def _workflow(model: AnthropicModel) -> Workflow:
    agent = Agent("Calc", model=model, system="You add.", tools=[add], max_tokens=4096)
    return Workflow("calc", [loop(steps=[agent], until=until_answered, max_iterations=4)])


def _script_add(server: MessagesAPIServer, *, redacted: bool = False) -> None:
    server.script(
        thinking(THOUGHT, tool_use("add", {"a": 2, "b": 3}), redacted=redacted, thinking_tokens=9),
        thinking("The tool said 5.", text("2 + 3 = 5.")),
    )


# --- a workflow with thinking and tools --------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("redacted", [False, True], ids=["thinking", "with-redacted"])
async def test_thinking_turn_that_called_a_tool_sends_its_blocks_back(
    api_server: MessagesAPIServer, stream: bool, redacted: bool
) -> None:
    """The turn that thought and called `add` keeps its blocks; the next request starts the
    turn's assistant message with them, unchanged and in order, and the server (which
    checks that) accepts it."""
    _script_add(api_server, redacted=redacted)
    run = await _workflow(_model(api_server, stream=stream)).arun("What is 2 + 3?")
    assert [r.status for r in api_server.requests] == [200, 200], api_server.rejected
    first, second = api_server.bodies
    assert first["thinking"] == second["thinking"] == THINKING
    sent = second["messages"][1]["content"]
    issued = thinking(THOUGHT, text("x"), redacted=redacted).content[:-1]
    assert sent[: len(issued)] == issued
    assert [block["type"] for block in sent[len(issued) :]] == ["tool_use"]
    assert run.output == "2 + 3 = 5."
    first_turn = run.turns[0]
    assert first_turn.reasoning == THOUGHT
    assert first_turn.reasoning_tokens == 9
    assert list(first_turn.reasoning_blocks) == issued
    assert list(run.history[1].reasoning_blocks) == issued
    assert first_turn.info.response == ""
    assert run.turns[1].reasoning == "The tool said 5."
    assert "tool said" not in run.turns[1].info.response


async def test_a_continuation_without_the_thinking_is_rejected(
    api_server: MessagesAPIServer,
) -> None:
    """What the kept blocks are for: the same history without them gets the API's 400."""
    _script_add(api_server)
    model = _model(api_server)
    run = await _workflow(model).arun("What is 2 + 3?")
    stripped = [m.model_copy(update={"reasoning_blocks": []}) for m in run.history[:3]]
    api_server.script(text("unused"))
    with pytest.raises(ModelError) as info:
        await model.respond(ModelRequest(agent="Calc", messages=stripped, max_tokens=4096))
    assert info.value.status_code == 400
    assert "Expected `thinking` or `redacted_thinking`, but found `tool_use`" in str(info.value)


async def test_a_thinking_turn_after_a_plain_answer_keeps_its_own_message(
    api_server: MessagesAPIServer,
) -> None:
    """In a loop, a turn that answered without tools and the thinking turn after it are
    not merged into one assistant message (whose thinking would then not come first): the
    continuation prompt the second answered stands between them."""
    api_server.script(
        thinking("Not done yet.", text("Working on it.")),
        thinking(THOUGHT, tool_use("add", {"a": 2, "b": 3})),
        thinking("Done.", text("done")),
    )
    agent = Agent("Calc", model=_model(api_server), tools=[add], max_tokens=4096)
    until_done = loop(steps=[agent], until=lambda ctx: ctx.output == "done", max_iterations=4)
    run = await Workflow("calc", [until_done]).arun("What is 2 + 3?")
    assert [r.status for r in api_server.requests] == [200, 200, 200], api_server.rejected
    roles = [(m["role"], m["content"][0]["type"]) for m in api_server.bodies[2]["messages"]]
    assert roles == [
        ("user", "text"),
        ("assistant", "thinking"),
        ("user", "text"),
        ("assistant", "thinking"),
        ("user", "tool_result"),
    ]
    assert api_server.bodies[2]["messages"][2]["content"][0]["text"] == CONTINUE_PROMPT
    assert run.output == "done"


async def test_replayed_thinking_turn_goes_back_to_the_api(api_server: MessagesAPIServer) -> None:
    """A replay rebuilds the history from the recorded turns: the replayed turn's blocks are
    in it, so the first live request after it is accepted."""
    _script_add(api_server)
    workflow = _workflow(_model(api_server))
    recorded = await workflow.arun("What is 2 + 3?")
    api_server.script(thinking("The tool said 5 again.", text("Still 5.")))
    again = await workflow.arun("What is 2 + 3?", replay=recorded, live_from=1)
    assert [r.status for r in api_server.requests] == [200, 200, 200], api_server.rejected
    assert again.turns[0].replayed and not again.turns[1].replayed
    assert api_server.bodies[2]["messages"] == api_server.bodies[1]["messages"]
    assert again.turns[0].reasoning_blocks == recorded.turns[0].reasoning_blocks
    assert again.output == "Still 5."


def test_forked_run_sends_the_kept_thinking(api_server: MessagesAPIServer) -> None:
    """A fork after the thinking turn rebuilds its history from the recorded turns too: the
    live turn's request carries the blocks and is accepted."""
    _script_add(api_server)
    recorded = _workflow(_model(api_server)).run("What is 2 + 3?", store=False)
    api_server.script(thinking("Forked.", text("Five.")))
    forked = recorded.fork(1, store=False)
    assert [r.status for r in api_server.requests] == [200, 200, 200], api_server.rejected
    assert [t.replayed for t in forked.turns] == [True, False]
    assert api_server.bodies[2]["messages"] == api_server.bodies[1]["messages"]
    assert forked.output == "Five."


async def test_blocks_survive_the_store(api_server: MessagesAPIServer, tmp_path: Any) -> None:
    """A run loaded back from SQLite keeps the blocks on its turns and its history."""

    _script_add(api_server)
    with SqliteRunStore.from_path(tmp_path / "runs.sqlite3") as store:
        run = await _workflow(_model(api_server)).arun("What is 2 + 3?", store=store)
        loaded = Run.load(run.run_id, store=store)
    assert loaded.turns[0].reasoning_blocks == run.turns[0].reasoning_blocks != ()
    assert loaded.history[1].reasoning_blocks == run.history[1].reasoning_blocks


async def test_a_call_written_only_in_thinking_is_not_rescued(
    api_server: MessagesAPIServer,
) -> None:
    """Thinking is not an action: a call drafted in it is not rescued, and the response is
    the text alone."""
    api_server.script(thinking(f"Maybe {RESCUABLE}? No, I know it.", text("It is 5.")))
    run = await _workflow(_model(api_server)).arun("What is 2 + 3?")
    turn = run.turns[0]
    assert turn.tool_calls == []
    assert turn.info.response == "It is 5."
    assert turn.reasoning is not None and RESCUABLE in turn.reasoning
    assert RESCUABLE not in json.dumps(turn.info.model_dump())


async def test_without_thinking_no_blocks_are_sent(api_server: MessagesAPIServer) -> None:
    """A model without `thinking=` sends no `thinking` field and no reasoning blocks, even
    for a history that holds some."""
    block = thinking_block("old thought")
    history = [
        Message(role="user", content="Add."),
        Message(
            role="assistant",
            content="",
            agent="Calc",
            tool_calls=[ToolCall(id="toolu_1", name="add", arguments={"a": 1, "b": 2})],
            reasoning_blocks=[block],
        ),
        Message(role="tool", content="3", agent="Calc", tool_call_id="toolu_1"),
    ]
    api_server.script(text("3"))
    model = _model(api_server, thinking=None)
    await model.respond(ModelRequest(agent="Calc", messages=history))
    body = api_server.bodies[-1]
    assert "thinking" not in body
    assert "old thought" not in json.dumps(body)
    assert (
        _model(api_server).render(ModelRequest(agent="Calc", messages=history))["messages"][1][
            "content"
        ][0]
        == block
    )


@pytest.mark.parametrize(
    ("thinking_", "problem"),
    [
        ("on", "must be a dict with a `type`"),
        ({"budget_tokens": 2048}, "must be a dict with a `type`"),
        ({"type": "enabled"}, "needs `budget_tokens`"),
        ({"type": "enabled", "budget_tokens": "2k"}, "needs `budget_tokens`"),
    ],
)
def test_bad_thinking_setting_says_how_to_fix_it(thinking_: Any, problem: str) -> None:
    with pytest.raises(ValueError, match=problem) as info:
        AnthropicModel("claude-test", thinking=thinking_)
    assert "budget_tokens': 2048" in str(info.value) or "e.g. 2048" in str(info.value)


# --- the server rejects what the API rejects ---------------------------------------------


async def _first_turn(client: anthropic.AsyncAnthropic) -> list[dict[str, Any]]:
    """Ask once; return the assistant content as the API sent it, as request blocks."""
    message = await client.messages.create(
        model="m",
        max_tokens=4096,
        thinking=THINKING,
        messages=[_ASK],  # type: ignore[arg-type]
    )
    return [block.model_dump(exclude_none=True) for block in message.content]


_ASK = {"role": "user", "content": "What is 2 + 3?"}


def _swap_first_two(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [content[1], content[0], *content[2:]]


def _resigned(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**content[0], "signature": content[0]["signature"][:-4] + "AAA="}, *content[1:]]


def _rethought(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**content[0], "thinking": content[0]["thinking"] + " Also."}, *content[1:]]


CONTINUATIONS = {
    "dropped": (
        lambda c: c[2:],
        "Expected `thinking` or `redacted_thinking`, but found `tool_use`",
    ),
    "text first": (
        lambda c: [{"type": "text", "text": "Adding."}, *c],
        "Expected `thinking` or `redacted_thinking`, but found `text`",
    ),
    "thinking after the call": (
        lambda c: [c[2], c[0], c[1]],
        "Expected `thinking` or `redacted_thinking`, but found `tool_use`",
    ),
    "blocks swapped": (_swap_first_two, "cannot be modified"),
    "redacted one dropped": (lambda c: [c[0], c[2]], "cannot be modified"),
    "signature altered": (_resigned, "Invalid `signature` in `thinking` block"),
    "thought altered": (_rethought, "Invalid `signature` in `thinking` block"),
    "redacted data altered": (
        lambda c: [c[0], {**c[1], "data": "eA==." + c[1]["data"].split(".")[1]}, c[2]],
        "Invalid `data` in `redacted_thinking` block",
    ),
}


@pytest.mark.parametrize(("change", "problem"), CONTINUATIONS.values(), ids=CONTINUATIONS.keys())
async def test_server_rejects_a_continuation_that_changes_the_thinking(
    api_server: MessagesAPIServer, change: Any, problem: str
) -> None:
    """Through the real SDK: after a thinking+tool_use answer, the continuation is accepted
    only with the answer's reasoning blocks first, all of them, unchanged, in order."""
    api_server.script(
        thinking(THOUGHT, tool_use("add", {"a": 2, "b": 3}, id="toolu_t1"), redacted=True),
        text("5"),
    )
    client = anthropic.AsyncAnthropic(api_key="k", base_url=api_server.base_url, max_retries=0)
    content = await _first_turn(client)
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_t1"}]}

    async def continue_with(blocks: list[dict[str, Any]]) -> None:
        await client.messages.create(
            model="m",
            max_tokens=4096,
            thinking=THINKING,  # type: ignore[arg-type]
            messages=[_ASK, {"role": "assistant", "content": blocks}, result],  # type: ignore[list-item]
        )

    with pytest.raises(anthropic.BadRequestError) as info:
        await continue_with(change(content))
    await continue_with(content)  # the unchanged continuation is accepted
    await client.close()
    assert problem in str(info.value)
    assert api_server.remaining() == 0


def test_server_checks_the_thinking_setting() -> None:
    body: dict[str, Any] = {"model": "m", "max_tokens": 2048, "messages": [_ASK]}
    too_big = validate({**body, "thinking": THINKING})
    assert too_big is not None and "must be greater than `thinking.budget_tokens`" in too_big
    too_small = validate({**body, "thinking": {"type": "enabled", "budget_tokens": 100}})
    assert too_small is not None and "greater than or equal to 1024" in too_small
    assert validate({**body, "max_tokens": 4096, "thinking": THINKING}) is None


def test_server_refuses_thinking_it_did_not_sign() -> None:
    forged = {"type": "thinking", "thinking": "I am Claude.", "signature": "c2lnbmVk"}
    assistant = {"role": "assistant", "content": [forged, {"type": "text", "text": "Hi."}]}
    body = {"model": "m", "max_tokens": 5, "messages": [_ASK, assistant, _ASK]}
    problem = validate(body)
    assert problem is not None and "Invalid `signature`" in problem
    signed = {
        "role": "assistant",
        "content": [thinking_block("I am Claude."), redacted_thinking_block()],
    }
    assert validate({**body, "messages": [_ASK, signed, _ASK]}) is None


async def test_streamed_thinking_never_reaches_text_deltas(api_server: MessagesAPIServer) -> None:
    """With `stream=True`, subscribers get the answer's text as it arrives, never the
    thinking."""
    api_server.script(thinking(THOUGHT, text("It is 5.")))
    agent = Agent("Calc", model=_model(api_server, stream=True), max_tokens=4096)
    session = Workflow("calc", [agent]).session("What is 2 + 3?")
    events: list[Event] = []
    session.subscribe(events.append)
    run = await session.run()
    deltas = [event.text for event in events if event.kind == "text_delta"]
    assert "".join(deltas) == "It is 5." == run.output  # type: ignore[arg-type]
    assert run.turns[0].reasoning == THOUGHT


# --- every history of a thinking model maps to a valid request ---------------------------


def _thought(history: list[Message]) -> list[Message]:
    """The history as a thinking model leaves it: every answer has its own signed blocks."""
    return [
        m.model_copy(update={"reasoning_blocks": [thinking_block(f"thought {i}")]})
        if m.role == "assistant"
        else m
        for i, m in enumerate(history)
    ]


@settings(max_examples=200, deadline=None)
@given(history=histories().map(_thought), agent=st.sampled_from([*AGENTS, "D"]))
def test_every_thinking_history_maps_to_a_valid_request(history: list[Message], agent: str) -> None:
    """Whatever the history, with thinking on the request passes the server's checks, each
    of the agent's own turns starts its own assistant message with its blocks unchanged,
    and no other agent's thinking is sent."""
    request = ModelRequest(agent=agent, system="S", messages=history, tools=TOOLS, max_tokens=4096)
    params = request_params(request, model="m", thinking=THINKING)
    assert validate(params) is None
    sent = [b for m in params["messages"] for b in m["content"] if b["type"] == "thinking"]
    own = [m for m in history if m.role == "assistant" and m.agent == agent]
    assert sent == [block for m in own for block in m.reasoning_blocks]
    for message in params["messages"]:
        types = [block["type"] for block in message["content"]]
        if "thinking" in types:
            assert message["role"] == "assistant"
            assert types.index("thinking") == 0
            assert types.count("thinking") == 1
