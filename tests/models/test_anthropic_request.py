"""The exact Messages API request `AnthropicModel` sends for a shared multi-agent history,
as received by the 127.0.0.1 server through the real SDK."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from messages_api_server import MessagesAPIServer, text, validate

from thena_nb.core.records.model import ModelRequest, ToolSpec
from thena_nb.core.records.types import Message, ToolCall
from thena_nb.models.anthropic import (
    CONTINUE_PROMPT,
    START_PROMPT,
    AnthropicModel,
    map_history,
    request_params,
)

pytestmark = pytest.mark.anyio


def _text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def _use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def _result(call_id: str, content: str, *, is_error: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": content}
    if is_error:
        block["is_error"] = True
    return block


def user(content: str) -> Message:
    return Message(role="user", content=content)


def said(agent: str, content: str, *calls: ToolCall) -> Message:
    return Message(role="assistant", content=content, agent=agent, tool_calls=list(calls))


def call(call_id: str, name: str, source: str = "native", **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments, source=source)  # type: ignore[arg-type]


def result(agent: str, call_id: str, content: str, *, failed: bool = False) -> Message:
    return Message(role="tool", content=content, agent=agent, tool_call_id=call_id, is_error=failed)


async def _sent(server: MessagesAPIServer, agent: str, history: list[Message]) -> list[Any]:
    """What the server received as `messages` when `agent` asked with `history`."""
    server.script(text("ok"))
    model = AnthropicModel("claude-test", base_url=server.base_url, api_key="k", cache=False)
    await model.respond(ModelRequest(agent=agent, messages=history))
    assert server.rejected == []
    return server.bodies[-1]["messages"]


async def test_plain_input(api_server: MessagesAPIServer) -> None:
    """The run input is one user text block."""
    assert await _sent(api_server, "Executor", [user("Hello")]) == [
        {"role": "user", "content": [_text("Hello")]}
    ]


async def test_tool_round_trip_with_a_failed_call(api_server: MessagesAPIServer) -> None:
    """The agent's own turn is its text and a `tool_use` per native call; the results follow
    in the next user message with the same ids, the failed one with `is_error`."""
    history = [
        user("Add 1 and 2, then look up 'x'."),
        said(
            "Calc", "Adding.", call("toolu_1", "add", a=1, b=2), call("toolu_2", "lookup", word="x")
        ),
        result("Calc", "toolu_1", "3"),
        result("Calc", "toolu_2", "Tool `lookup` failed: KeyError: 'x'", failed=True),
    ]
    assert await _sent(api_server, "Calc", history) == [
        {"role": "user", "content": [_text("Add 1 and 2, then look up 'x'.")]},
        {
            "role": "assistant",
            "content": [
                _text("Adding."),
                _use("toolu_1", "add", {"a": 1, "b": 2}),
                _use("toolu_2", "lookup", {"word": "x"}),
            ],
        },
        {
            "role": "user",
            "content": [
                _result("toolu_1", "3"),
                _result("toolu_2", "Tool `lookup` failed: KeyError: 'x'", is_error=True),
            ],
        },
    ]


async def test_other_agents_are_attributed_user_text(api_server: MessagesAPIServer) -> None:
    """Other agents' text, calls and results reach the model as user text naming them,
    joined with the input into one user message."""
    history = [
        user("Review this code."),
        said("Security", "No injection risks."),
        said("Perf", "", call("toolu_p1", "profile", fn="main")),
        result("Perf", "toolu_p1", "main: 12ms"),
        said("Perf", "Fast enough."),
    ]
    assert await _sent(api_server, "Executor", history) == [
        {
            "role": "user",
            "content": [
                _text("Review this code."),
                _text("[Security] No injection risks."),
                _text('[Perf] called `profile` with {"fn": "main"}'),
                _text("[Perf] `profile` returned:\nmain: 12ms"),
                _text("[Perf] Fast enough."),
            ],
        }
    ]


async def test_rescued_calls_send_their_results_as_user_text(
    api_server: MessagesAPIServer,
) -> None:
    """A rescued call has no API id: the assistant text carries it and its result (or
    failure) comes back as user text; no `rescued-` id goes on the wire."""
    markup = '<tool_call>{"name": "get_weather", "arguments": {"city": "Lisbon"}}</tool_call>'
    history = [
        user("Weather in Lisbon and Porto?"),
        said("Exec", markup, call("rescued-0-0", "get_weather", "rescued", city="Lisbon")),
        result("Exec", "rescued-0-0", "sunny"),
        said("Exec", "And Porto: " + markup, call("rescued-1-0", "get_weather", "rescued")),
        result("Exec", "rescued-1-0", "Tool `get_weather` failed: missing city", failed=True),
    ]
    sent = await _sent(api_server, "Exec", history)
    assert sent == [
        {"role": "user", "content": [_text("Weather in Lisbon and Porto?")]},
        {"role": "assistant", "content": [_text(markup)]},
        {"role": "user", "content": [_text("Your call to `get_weather` returned:\nsunny")]},
        {"role": "assistant", "content": [_text("And Porto: " + markup)]},
        {
            "role": "user",
            "content": [
                _text("Your call to `get_weather` failed:\nTool `get_weather` failed: missing city")
            ],
        },
    ]
    assert "rescued-" not in json.dumps(api_server.bodies[-1])


async def test_continuation_after_the_agents_own_answer(api_server: MessagesAPIServer) -> None:
    """A history that ends with the asking agent's own answer gets a continuation message."""
    history = [user("Hi"), said("Exec", "Hello! How can I help?")]
    assert await _sent(api_server, "Exec", history) == [
        {"role": "user", "content": [_text("Hi")]},
        {"role": "assistant", "content": [_text("Hello! How can I help?")]},
        {"role": "user", "content": [_text(CONTINUE_PROMPT)]},
    ]
    # Another agent's last answer is already user text: nothing to add.
    assert (await _sent(api_server, "Reviewer", history))[-1] == {
        "role": "user",
        "content": [_text("Hi"), _text("[Exec] Hello! How can I help?")],
    }


PARALLEL = [
    user("Review."),
    said("Security", "Checking.", call("toolu_s1", "scan")),
    result("Security", "toolu_s1", "clean"),
    said("Perf", "", call("toolu_p1", "profile")),
    result("Perf", "toolu_p1", "timeout", failed=True),
]


async def test_parallel_branches_merged_for_each_branch(api_server: MessagesAPIServer) -> None:
    """After `parallel([Security, Perf])` each branch sees its own turn as assistant blocks
    and the sibling's as attributed text, merged into alternating messages."""
    assert await _sent(api_server, "Security", PARALLEL) == [
        {"role": "user", "content": [_text("Review.")]},
        {"role": "assistant", "content": [_text("Checking."), _use("toolu_s1", "scan", {})]},
        {
            "role": "user",
            "content": [
                _result("toolu_s1", "clean"),
                _text("[Perf] called `profile` with {}"),
                _text("[Perf] `profile` failed:\ntimeout"),
            ],
        },
    ]
    assert await _sent(api_server, "Perf", PARALLEL) == [
        {
            "role": "user",
            "content": [
                _text("Review."),
                _text("[Security] Checking.\n[Security] called `scan` with {}"),
                _text("[Security] `scan` returned:\nclean"),
            ],
        },
        {"role": "assistant", "content": [_use("toolu_p1", "profile", {})]},
        {"role": "user", "content": [_result("toolu_p1", "timeout", is_error=True)]},
    ]


async def test_same_agent_in_two_branches(api_server: MessagesAPIServer) -> None:
    """Two branches of one agent give two assistant turns in a row: they become one
    assistant message, and its call is still answered right after."""
    history = [
        user("Go."),
        said("Worker", "Part A done."),
        said("Worker", "Part B needs a tool.", call("toolu_w2", "fetch", url="x")),
        result("Worker", "toolu_w2", "fetched"),
    ]
    assert await _sent(api_server, "Worker", history) == [
        {"role": "user", "content": [_text("Go.")]},
        {
            "role": "assistant",
            "content": [
                _text("Part A done."),
                _text("Part B needs a tool."),
                _use("toolu_w2", "fetch", {"url": "x"}),
            ],
        },
        {"role": "user", "content": [_result("toolu_w2", "fetched")]},
    ]


async def test_edge_cases_stay_valid(api_server: MessagesAPIServer) -> None:
    """Empty turns are dropped, an empty input becomes a start message, a call without its
    result becomes text, and an empty result is sent without content."""
    assert await _sent(api_server, "Exec", [user("Hi"), said("Exec", "")]) == [
        {"role": "user", "content": [_text("Hi")]}
    ]
    assert await _sent(api_server, "Exec", [user("  ")]) == [
        {"role": "user", "content": [_text(START_PROMPT)]}
    ]
    assert await _sent(api_server, "Exec", [said("Exec", "Earlier answer.")]) == [
        {"role": "user", "content": [_text(START_PROMPT)]},
        {"role": "assistant", "content": [_text("Earlier answer.")]},
        {"role": "user", "content": [_text(CONTINUE_PROMPT)]},
    ]
    assert await _sent(
        api_server, "Exec", [user("go"), said("Exec", "", call("toolu_9", "f", a=1))]
    ) == [
        {"role": "user", "content": [_text("go")]},
        {"role": "assistant", "content": [_text('(called `f` with {"a": 1}; no result)')]},
        {"role": "user", "content": [_text(CONTINUE_PROMPT)]},
    ]
    history = [user("go"), said("Exec", "", call("toolu_8", "noop")), result("Exec", "toolu_8", "")]
    assert (await _sent(api_server, "Exec", history))[-1] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_8"}],
    }


async def test_a_cut_history_keeps_no_orphan_result(api_server: MessagesAPIServer) -> None:
    """A history whose first kept message is a tool result (its call was cut off) sends the
    result as text rather than a `tool_result` with nothing to answer."""
    history = [result("Exec", "toolu_1", "42"), said("Exec", "The answer is 42.")]
    assert await _sent(api_server, "Exec", history) == [
        {"role": "user", "content": [_text("Call `toolu_1` returned:\n42")]},
        {"role": "assistant", "content": [_text("The answer is 42.")]},
        {"role": "user", "content": [_text(CONTINUE_PROMPT)]},
    ]


# --- every history maps to a valid request ---------------------------------------------

AGENTS = ["A", "B", "C"]
TOOLS = [ToolSpec(name="f", description="F."), ToolSpec(name="g")]
texts = st.sampled_from(["", " ", "ok", "Some text.", "trailing space ", "line\n"])


@st.composite
def turns(draw: st.DrawFn, index: int) -> list[Message]:
    """One turn as the executor records it: the answer, then one result per call."""
    agent = draw(st.sampled_from(AGENTS))
    rescued = draw(st.booleans())
    count = draw(st.integers(0, 3))
    source = "rescued" if rescued else "native"
    prefix = f"rescued-{index}-" if rescued else f"toolu_{index}_"
    calls = [
        call(f"{prefix}{n}", draw(st.sampled_from(["f", "g", "h"])), source) for n in range(count)
    ]
    messages = [said(agent, draw(texts), *calls)]
    if draw(st.integers(0, 4)) == 0:
        messages.append(user(draw(texts)))  # input that arrived between a call and its result
    for made in calls:
        if draw(st.integers(0, 5)):  # sometimes a result is missing (a stopped run)
            messages.append(result(agent, made.id, draw(texts), failed=draw(st.booleans())))
    return messages


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """A run's history: the input, turns and later inputs, possibly cut at the front."""
    history: list[Message] = [user(draw(texts))]
    for index in range(draw(st.integers(0, 8))):
        if draw(st.integers(0, 5)) == 0:
            history.append(user(draw(texts)))
        history.extend(draw(turns(index)))
    return history[draw(st.integers(0, len(history))) :]


def _results_right_after_their_calls(history: list[Message], agent: str) -> set[str]:
    """The ids of `agent`'s native calls whose results follow the message that made them,
    among the tool messages right after it."""
    out: set[str] = set()
    for i, message in enumerate(history):
        if message.role != "assistant" or message.agent != agent:
            continue
        native = {c.id for c in message.tool_calls if c.source == "native"}
        for later in history[i + 1 :]:
            if later.role != "tool":
                break
            if later.tool_call_id in native:
                out.add(later.tool_call_id)
    return out


@settings(max_examples=300, deadline=None)
@given(history=histories(), agent=st.sampled_from([*AGENTS, "D"]), cache=st.booleans())
def test_every_history_maps_to_a_valid_request(
    history: list[Message], agent: str, cache: bool
) -> None:
    """Whatever the history (agents, native and rescued calls, failures, blank text, a cut
    front, input between a call and its result), the request passes the server's checks,
    ends with a user message, sends as a `tool_result` every own native result that stands
    right after its call (and no other: `_wire`, where a tool result may stand), and sends
    no rescued id."""
    request = ModelRequest(agent=agent, system="S", messages=history, tools=TOOLS)
    params = request_params(request, model="m", cache=cache)
    assert validate(params) is None
    messages = params["messages"]
    assert messages[-1]["role"] == "user"
    assert "rescued-" not in json.dumps(
        [b for m in messages for b in m["content"] if b["type"] != "text"]
    )
    sent_results = {
        block["tool_use_id"]
        for message in messages
        for block in message["content"]
        if block["type"] == "tool_result"
    }
    assert sent_results == _results_right_after_their_calls(history, agent)
    assert map_history(history, agent) == [
        {
            **m,
            "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]],
        }
        for m in messages
    ]
