"""Workflows driving `AnthropicModel` end to end: the executor, the real SDK and the
127.0.0.1 Messages API server; plus one live smoke test against the real API."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from messages_api_server import MessagesAPIServer, status, text, tool_use
from pool_checks import count_ca_bundle_loads, in_a_cell, resource_warnings

from thena_nb import Agent, Event, ModelError, Workflow, loop, parallel, tool, until_answered
from thena_nb.core.records.types import RetryPolicy
from thena_nb.models import AnthropicModel

pytestmark = pytest.mark.anyio

SENTINEL_KEY = "sk-ant-sentinel-e2e-93b1f07a"
# Read before the suite's autouse fixture clears the environment for every test.
LIVE_KEY = os.environ.get("ANTHROPIC_API_KEY")
FAST_RETRY = RetryPolicy(initial_delay=0.01, jitter=False)
RESCUED_ADD = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'


@tool
def lookup(word: str) -> str:
    """Look a word up in the glossary."""
    return {"sql": "a query language"}[word]


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _review(model: AnthropicModel) -> Workflow:
    security = Agent("Security", model=model, system="You are Security.", tools=[lookup])
    perf = Agent("Perf", model=model, system="You are Perf.", tools=[add])
    executor = Agent("Executor", model=model, system="You are Executor.", tools=[lookup, add])
    return Workflow(
        "review",
        [
            parallel([security, perf]),
            loop(steps=[executor], until=until_answered, max_iterations=6),
        ],
        retry=FAST_RETRY,
    )


def _script_review(server: MessagesAPIServer) -> None:
    server.script(tool_use("lookup", {"word": "sql"}, text="Checking terms."), when="Security")
    server.script(text("Looks fast enough."), when="Perf")
    server.script(
        tool_use("lookup", {"word": "nope"}),  # fails: KeyError
        text("Let me add them.\n" + RESCUED_ADD),  # rescued from the text
        text("All done: 5."),
        when="Executor",
    )


def _by_system(server: MessagesAPIServer, name: str) -> list[dict[str, Any]]:
    return [body for body in server.bodies if f"You are {name}." in json.dumps(body.get("system"))]


async def test_multi_agent_workflow_sends_only_valid_requests() -> None:
    """`parallel([Security, Perf])` then a tool loop with a failing call and a rescued call:
    every request the server got was valid (no 400), and each carries what it should."""
    with MessagesAPIServer(api_key=SENTINEL_KEY) as server:
        _script_review(server)
        model = AnthropicModel("claude-test", base_url=server.base_url, api_key=SENTINEL_KEY)
        run = await _review(model).arun("Review the login handler.")
    assert [request.status for request in server.requests] == [200] * 5
    assert server.remaining() == 0
    assert run.status == "finished"
    assert run.output == "All done: 5."
    sources = [turn.info.tool_call_source for turn in run.turns]
    assert [turn.agent for turn in run.turns] == ["Security", "Perf", *["Executor"] * 3]
    assert sources == ["native", None, "native", "rescued", None]
    assert [turn.info.tool_error for turn in run.turns] == [False, None, True, False, None]

    executor = _by_system(server, "Executor")
    first, second, third = (body["messages"] for body in executor)
    # The parallel block's turns are the other agents' attributed text in one user message.
    assert [block["text"] for block in first[0]["content"]] == [
        "Review the login handler.",
        '[Security] Checking terms.\n[Security] called `lookup` with {"word": "sql"}',
        "[Security] `lookup` returned:\na query language",
        "[Perf] Looks fast enough.",
    ]
    assert len(first) == 1
    # The failed native call comes back as an error result right after its tool_use.
    call_id = second[1]["content"][0]["id"]
    assert second[1]["content"][0]["name"] == "lookup"
    assert second[2]["content"][0]["tool_use_id"] == call_id
    assert second[2]["content"][0]["is_error"] is True
    assert "KeyError" in second[2]["content"][0]["content"]
    # The rescued call stays in the assistant's text; its result is user text.
    assert third[3] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Let me add them.\n" + RESCUED_ADD}],
    }
    assert third[4]["content"][0]["text"] == "Your call to `add` returned:\n5"
    assert "rescued-" not in json.dumps(executor)
    # Security's own request had its own history only: the input.
    assert _by_system(server, "Security")[0]["messages"] == [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "Review the login handler.",
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        }
    ]


async def test_sentinel_key_in_no_record_repr_json_or_error() -> None:
    """The key reaches the server, but no repr, record, `run.to_json()`, HTML, frame or
    error text of a finished or failed run contains it."""
    with MessagesAPIServer(api_key=SENTINEL_KEY) as server:
        _script_review(server)
        model = AnthropicModel("claude-test", base_url=server.base_url, api_key=SENTINEL_KEY)
        workflow = _review(model)
        run = await workflow.arun("Review the login handler.")
        server.script(status(401, "invalid x-api-key"), when="Security")
        server.script(text("fine"), when="Perf")
        with pytest.raises(ModelError) as info:
            await workflow.arun("Again.")
    error = info.value
    failed = error.run  # type: ignore[attr-defined]
    texts = [
        repr(model),
        repr(workflow),
        repr(run),
        run.to_json(),
        run._repr_html_(),
        run.frame().to_string(),
        repr(run.turns),
        repr(run.history),
        str(error),
        repr(error),
        "\n".join(getattr(error, "__notes__", [])),
        str(error.__cause__),
        failed.to_json(),
        failed._repr_html_(),
    ]
    assert error.status_code == 401
    assert "'Security'" in str(error)
    assert failed.status == "failed"
    for text_ in texts:
        assert SENTINEL_KEY not in text_


async def test_429_twice_then_success_is_one_turn_with_three_attempts(
    api_server: MessagesAPIServer,
) -> None:
    """The executor retries transient errors (the SDK does not): two 429s with
    `retry-after: 0`, then a reply, make one turn with `attempts == 3`."""
    api_server.script(
        status(429, headers={"retry-after": "0"}),
        status(429, headers={"retry-after": "0"}),
        text("Third time."),
    )
    model = AnthropicModel("claude-test", base_url=api_server.base_url, api_key="k")
    agent = Agent("Solo", model=model)
    run = await Workflow("retry", [agent], retry=FAST_RETRY).arun("hi")
    assert [request.status for request in api_server.requests] == [429, 429, 200]
    assert len(run.turns) == 1
    assert run.turns[0].attempts == 3
    assert run.usage.model_calls == 3
    assert run.output == "Third time."


async def test_streamed_text_reaches_session_subscribers(api_server: MessagesAPIServer) -> None:
    """With `stream=True` the text arrives as `text_delta` events while the turn runs, and
    the recorded turn has the whole text and the usage."""
    api_server.script(text("Streaming works end to end.", input_tokens=11, output_tokens=6))
    model = AnthropicModel("claude-test", base_url=api_server.base_url, api_key="k", stream=True)
    session = Workflow("stream", [Agent("Talker", model=model)]).session("hi")
    events: list[Event] = []
    session.subscribe(events.append)
    run = await session.run()
    deltas = [event.text for event in events if event.kind == "text_delta"]
    assert len(deltas) > 1
    assert "".join(deltas) == "Streaming works end to end." == run.output  # type: ignore[arg-type]
    assert (run.turns[0].input_tokens, run.turns[0].output_tokens) == (11, 6)
    assert api_server.bodies[0]["stream"] is True


@pytest.mark.live
@pytest.mark.skipif(LIVE_KEY is None, reason="talks to the real API; set ANTHROPIC_API_KEY")
def test_live_smoke() -> None:
    """One tool round trip against the real API, streamed."""
    model = AnthropicModel(
        os.environ.get("THENA_NB_LIVE_MODEL", "claude-haiku-4-5"), api_key=LIVE_KEY, stream=True
    )
    agent = Agent(
        "Calc",
        model=model,
        system="Use the `add` tool for arithmetic, then answer with the number only.",
        tools=[add],
        max_tokens=200,
    )
    run = Workflow("live", [loop(steps=[agent], until=until_answered, max_iterations=3)]).run(
        "What is 19 + 23?"
    )
    assert run.status == "finished"
    assert any(call.name == "add" and call.ok for turn in run.turns for call in turn.tool_calls)
    assert "42" in run.output
    assert run.usage.input_tokens > 0


def test_a_notebook_runs_connections_are_closed_with_its_loop() -> None:
    """Under a running loop (a Jupyter kernel's), `wf.run()` runs on a fresh loop of its
    own: the client made for that loop closes its connections before the loop closes, so
    none is left for the collector to find open."""
    with MessagesAPIServer(api_key=SENTINEL_KEY) as server:
        server.script(tool_use("add", {"a": 2, "b": 3}), text("5"))
        model = AnthropicModel("claude-test", base_url=server.base_url, api_key=SENTINEL_KEY)
        agent = Agent("Calc", model=model, tools=[add])
        wf = Workflow("w", [loop(steps=[agent], until=until_answered, max_iterations=3)])
        run, left_open = resource_warnings(lambda: in_a_cell(wf))
    assert run.output == "5"
    assert left_open == []


def test_pools_share_the_processs_tls_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client made for each event loop (a notebook's run has its own) loads the CA
    bundle (~25 ms of CPU) once per process at most, not once each."""
    loads = count_ca_bundle_loads(monkeypatch)
    with MessagesAPIServer(api_key=SENTINEL_KEY) as server:
        server.script(text("one"), text("two"), text("three"))
        model = AnthropicModel("claude-test", base_url=server.base_url, api_key=SENTINEL_KEY)
        wf = Workflow("w", [Agent("A", model=model)])
        outputs = [in_a_cell(wf).output for _ in range(3)]
    assert outputs == ["one", "two", "three"]
    assert len(loads) <= 1
