"""The two adapters agree (issue 40, section 8): on the key order of a call's arguments
wherever they write them, and on where a tool result may stand (`thena_nb.models._wire`).

Each history goes to `AnthropicModel` through the Messages API server and to
`OpenAICompatModel` through the chat completions server on 127.0.0.1; the tests read what
each server received: the body's bytes for the key order, its JSON for the rest.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from chat_completions_server import ChatCompletionsServer, Completion
from messages_api_server import MessagesAPIServer, text

from thena_nb.core.records.model import ModelRequest, ToolSpec
from thena_nb.core.records.types import Message, ToolCall
from thena_nb.models.anthropic import AnthropicModel
from thena_nb.models.openai_compat import OpenAICompatModel

pytestmark = pytest.mark.anyio

TOOLS = [ToolSpec(name="f"), ToolSpec(name="g")]


def user(content: str) -> Message:
    return Message(role="user", content=content)


def said(agent: str, content: str, *calls: ToolCall) -> Message:
    return Message(role="assistant", content=content, agent=agent, tool_calls=list(calls))


def call(call_id: str, name: str, arguments: dict[str, Any]) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def result(agent: str, call_id: str, content: str) -> Message:
    return Message(role="tool", content=content, agent=agent, tool_call_id=call_id)


async def anthropic_sent(server: MessagesAPIServer, history: list[Message]) -> tuple[bytes, Any]:
    """The body `AnthropicModel` sent for agent `Exec` asking with `history`: its bytes and
    its `messages`."""
    server.script(text("ok"))
    model = AnthropicModel("claude-test", base_url=server.base_url, api_key="k", cache=False)
    await model.respond(ModelRequest(agent="Exec", messages=history, tools=TOOLS))
    assert server.rejected == []
    return server.requests[-1].raw, server.bodies[-1]["messages"]


async def openai_sent(history: list[Message]) -> tuple[bytes, Any]:
    """The body `OpenAICompatModel` sent for agent `Exec` asking with `history` (the server
    refuses a `tool` message that does not answer the assistant message right before it)."""
    with ChatCompletionsServer([Completion("ok")]) as server:
        model = OpenAICompatModel("qwen3:8b", base_url=server.base_url, timeout=5.0)
        await model.respond(ModelRequest(agent="Exec", messages=history, tools=TOOLS))
        request = server.requests[-1]
    return request.raw, request.messages


def anthropic_view(messages: list[Any]) -> list[tuple[str, str]]:
    """What the model reads, in order: user text (a message's text blocks joined as chat
    completions joins user texts), API calls and API results by id."""
    out: list[tuple[str, str]] = []
    for message in messages:
        texts: list[str] = []
        for block in message["content"]:
            if block["type"] == "tool_use":
                out.append(("call", block["id"]))
            elif block["type"] == "tool_result":
                out.append(("result", block["tool_use_id"]))
            elif message["role"] == "user":
                texts.append(block["text"])
        if texts:
            out.append(("user", "\n\n".join(texts)))
    return out


def openai_view(messages: list[Any]) -> list[tuple[str, str]]:
    """`anthropic_view` for chat completions messages."""
    out: list[tuple[str, str]] = []
    for message in messages:
        if message["role"] == "system":
            continue
        out += [("call", c["id"]) for c in message.get("tool_calls") or ()]
        if message["role"] == "tool":
            out.append(("result", message["tool_call_id"]))
        elif message["role"] == "user":
            out.append(("user", message["content"]))
    return out


async def both_views(server: MessagesAPIServer, history: list[Message]) -> list[tuple[str, str]]:
    """What the model reads of `history` through either adapter: the same, or the test fails."""
    _, anthropic = await anthropic_sent(server, history)
    _, openai = await openai_sent(history)
    assert anthropic_view(anthropic) == openai_view(openai)
    return anthropic_view(anthropic)


# --- argument JSON: the model's own key order ----------------------------------------------

ARGUMENTS = {"zeta": 1, "alpha": {"b": 2, "a": "é"}}
"""A model's arguments, keys in the order it wrote them (not sorted), non-ASCII text in them."""
OWN_ORDER = '{"zeta": 1, "alpha": {"b": 2, "a": "é"}}'
WRITTEN = json.dumps(OWN_ORDER, ensure_ascii=False)[1:-1].encode()
"""`OWN_ORDER` inside a JSON string of the body, as its bytes go on the wire."""


async def test_both_adapters_keep_the_models_key_order(api_server: MessagesAPIServer) -> None:
    """The asker's answered call (the API's own), another agent's call (attributed text) and
    the asker's unanswered call (text): every one of them in the model's own key order, in
    the bytes each server received."""
    history = [
        user("Go."),
        said("Exec", "", call("c1", "f", ARGUMENTS)),
        result("Exec", "c1", "done"),
        said("Scout", "", call("c2", "g", ARGUMENTS)),
        result("Scout", "c2", "seen"),
        said("Exec", "Once more.", call("c3", "f", ARGUMENTS)),
    ]
    anthropic_raw, anthropic = await anthropic_sent(api_server, history)
    openai_raw, openai = await openai_sent(history)

    # Messages API: the `tool_use` input is a JSON object; the texts carry the JSON text.
    compact = b"".join(anthropic_raw.split())
    assert '"input":{"zeta":1,"alpha":{"b":2,"a":"é"}}'.encode() in compact
    assert anthropic_raw.count(WRITTEN) == 2  # the other agent's call, the unanswered one
    texts = [b["text"] for m in anthropic for b in m["content"] if b["type"] == "text"]
    attributed = f"[Scout] called `g` with {OWN_ORDER}"
    assert attributed in texts
    assert f"(called `f` with {OWN_ORDER}; no result)" in texts

    # Chat completions: the `arguments` string and the same texts.
    assert openai_raw.count(WRITTEN) == 3  # `arguments`, the other agent's, the unanswered
    assert openai[1]["tool_calls"][0]["function"]["arguments"] == OWN_ORDER
    assert attributed in openai[3]["content"]
    assert OWN_ORDER in openai[4]["content"]  # its unanswered call, as `<tool_call>` text


# --- where a tool result may stand ---------------------------------------------------------


async def test_a_result_right_after_its_call_is_the_apis_own(
    api_server: MessagesAPIServer,
) -> None:
    assert await both_views(
        api_server,
        [user("Go."), said("Exec", "", call("c1", "f", {})), result("Exec", "c1", "42")],
    ) == [("user", "Go."), ("call", "c1"), ("result", "c1")]


async def test_a_result_after_a_user_text_is_user_text_where_it_stands(
    api_server: MessagesAPIServer,
) -> None:
    """A user text between a call and its result (a history processor's, a trace's): the
    call is text, and the result stays after the user text, as text; nothing is moved."""
    history = [
        user("Go."),
        said("Exec", "", call("c1", "f", {"a": 1})),
        user("Meanwhile: hurry."),
        result("Exec", "c1", "42"),
    ]
    assert await both_views(api_server, history) == [
        ("user", "Go."),
        ("user", "Meanwhile: hurry.\n\nYour call to `f` returned:\n42"),
    ]


async def test_calls_answered_later_are_text_and_the_others_the_apis_own(
    api_server: MessagesAPIServer,
) -> None:
    """Two calls of one turn; the second is answered only after another agent's turn (held
    for a decision, say): the first goes as the API's call and result, the second as text,
    its result as user text after the other agent's turn."""
    history = [
        user("Go."),
        said("Exec", "", call("c1", "f", {}), call("c2", "g", {})),
        result("Exec", "c1", "first"),
        said("Scout", "Checking."),
        result("Exec", "c2", "second"),
    ]
    assert await both_views(api_server, history) == [
        ("user", "Go."),
        ("call", "c1"),
        ("result", "c1"),
        ("user", "[Scout] Checking.\n\nYour call to `g` returned:\nsecond"),
    ]


async def test_a_second_result_for_one_call_is_text(api_server: MessagesAPIServer) -> None:
    history = [
        user("Go."),
        said("Exec", "", call("c1", "f", {})),
        result("Exec", "c1", "first"),
        result("Exec", "c1", "again"),
    ]
    assert await both_views(api_server, history) == [
        ("user", "Go."),
        ("call", "c1"),
        ("result", "c1"),
        ("user", "Your call to `f` returned:\nagain"),
    ]


async def test_a_result_whose_call_was_cut_reads_the_same(api_server: MessagesAPIServer) -> None:
    history = [result("Exec", "c9", "42"), user("So?")]
    assert await both_views(api_server, history) == [("user", "Call `c9` returned:\n42\n\nSo?")]
