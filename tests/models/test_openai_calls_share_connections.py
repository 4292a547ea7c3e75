"""`OpenAICompatModel` on the wire: one connection pool per event loop, and `render`'s
parameters sent as they are.

A pool made for every call opened a connection (and built an SSL context, ~25 ms of CPU)
every turn; the SDK's own request building walked every message of the history against
the request's type hints on every call (~0.2 ms a message). Both grew a long run's turns
from a few ms to tens of ms. These tests run the real SDK against the chat completions
server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import gc
import pickle
import warnings
import weakref
from typing import Any

import pytest
from chat_completions_server import ChatCompletionsServer, Completion
from openai._utils import maybe_transform
from openai.types.chat import completion_create_params
from pool_checks import count_ca_bundle_loads, in_a_cell, resource_warnings

from thena_nb import Agent, Message, ToolCall, Workflow, loop, tool, until_answered
from thena_nb.models import ModelRequest
from thena_nb.models.openai_compat import OpenAICompatModel


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _script(server: ChatCompletionsServer, runs: int) -> None:
    """Each run: two calls of `add`, then an answer."""
    for _ in range(runs):
        server.add(
            Completion(tool_calls=(("call_a", "add", {"a": 1, "b": 2}),)),
            Completion(tool_calls=(("call_b", "add", {"a": 3, "b": 4}),)),
            Completion("done"),
        )


def _workflow(model: OpenAICompatModel) -> Workflow:
    agent = Agent("Calc", model=model, tools=[add])
    return Workflow("w", [loop(steps=[agent], until=until_answered, max_iterations=5)])


def _model(server: ChatCompletionsServer) -> OpenAICompatModel:
    model = OpenAICompatModel(
        "gpt-4o-mini", base_url=server.base_url, api_key="sk-test", timeout=5.0
    )
    model.provider = "openai"  # priced as OpenAI's own
    return model


def test_the_turns_and_runs_of_one_thread_share_a_connection() -> None:
    """Two runs of three turns each, `wf.run()` on one thread: six requests, one connection."""
    with ChatCompletionsServer() as server:
        _script(server, runs=2)
        wf = _workflow(_model(server))
        for _ in range(2):
            run = wf.run("go", store=False)
            assert (run.output, run.usage.model_calls, run.usage.tool_calls) == ("done", 3, 2)
    assert len(server.requests) == 6
    assert len({r.client for r in server.requests}) == 1


def test_each_event_loop_has_its_own_pool() -> None:
    """Connections belong to the loop that opened them: runs on two loops in turn each
    open their own and both finish, and a run on a thread's loop after them too."""
    with ChatCompletionsServer() as server:
        _script(server, runs=3)
        wf = _workflow(_model(server))
        for _ in range(2):
            run = asyncio.run(wf.arun("go", store=False))
            assert run.output == "done"
        assert wf.run("go", store=False).output == "done"
    clients = [r.client for r in server.requests]
    assert len(set(clients[:3])) == len(set(clients[3:6])) == len(set(clients[6:])) == 1
    assert len(set(clients)) == 3


def test_runs_on_many_loops_keep_only_the_last_loop_alive() -> None:
    """A pool's open connections hold the loop they belong to: a model used on one loop
    after another (`asyncio.run` each time) keeps the last one's pool alone, so the loops
    before it can go."""
    loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []
    with ChatCompletionsServer() as server:
        _script(server, runs=4)
        wf = _workflow(_model(server))

        async def one() -> Any:
            loops.append(weakref.ref(asyncio.get_running_loop()))
            return await wf.arun("go", store=False)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)  # the replaced pools' sockets
            outputs = [asyncio.run(one()).output for _ in range(4)]
            gc.collect()
        assert outputs == ["done"] * 4
        assert [ref() is not None for ref in loops] == [False, False, False, True]


def test_a_threads_loop_keeps_its_pool_while_other_loops_come_and_go() -> None:
    """`wf.run()` (the thread's reused loop) and `asyncio.run(wf.arun())` (a new loop each
    time) in turn: the three `wf.run()` share one connection, and no pool piles up."""
    with ChatCompletionsServer() as server:
        _script(server, runs=5)
        wf = _workflow(_model(server))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)  # the replaced pools' sockets
            for i in range(5):
                run = wf.run("go", store=False) if i % 2 == 0 else asyncio.run(wf.arun("go"))
                assert run.output == "done"
    clients = [r.client for r in server.requests]
    assert len({clients[i] for i in (0, 1, 2, 6, 7, 8, 12, 13, 14)}) == 1  # runs 1, 3, 5
    assert len(set(clients)) == 3


def test_a_model_dropped_on_a_threads_loop_takes_its_pool_with_it() -> None:
    """Models made and dropped one after another, each running on the thread's reused loop
    (which lives until exit): each one's client goes with it, not at exit."""
    kept: list[weakref.ref[Any]] = []
    with ChatCompletionsServer() as server:
        _script(server, runs=3)
        for _ in range(3):
            model = _model(server)
            assert _workflow(model).run("go", store=False).output == "done"
            kept += [weakref.ref(client) for client in model._clients.clients()]
            del model
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)  # their idle sockets
            gc.collect()
    assert len(kept) == 3
    assert [ref() for ref in kept] == [None, None, None]


def test_a_notebook_runs_loop_is_not_kept_alive() -> None:
    """The pool made on a notebook run's fresh loop is closed as that loop ends, and the
    model keeps neither: the loops of runs that ended can go."""
    loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []

    @tool
    def note(a: int, b: int) -> int:
        """Add two numbers, noting the loop the call ran on."""
        loops.append(weakref.ref(asyncio.get_running_loop()))
        return a + b

    with ChatCompletionsServer() as server:
        for _ in range(3):
            server.add(Completion(tool_calls=(("c1", "note", {"a": 1, "b": 2}),)))
            server.add(Completion("done"))
        agent = Agent("Calc", model=_model(server), tools=[note])
        wf = Workflow("w", [loop(steps=[agent], until=until_answered, max_iterations=3)])
        outputs = [in_a_cell(wf).output for _ in range(3)]
        gc.collect()
    assert outputs == ["done"] * 3
    assert len(loops) == 3
    assert [ref() for ref in loops] == [None, None, None]


def test_a_notebook_runs_pool_is_closed_with_its_loop() -> None:
    """Under a running loop (a Jupyter kernel's), `wf.run()` runs on a fresh loop of its
    own: the pool made on that loop is closed before the loop closes, so no connection is
    left for the collector to find open."""
    with ChatCompletionsServer() as server:
        _script(server, runs=1)
        wf = _workflow(_model(server))
        run, left_open = resource_warnings(lambda: in_a_cell(wf))
    assert run.output == "done"
    assert left_open == []


def test_models_and_their_pools_share_the_processs_tls_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Making TLS settings loads the CA bundle (~25 ms of CPU): building a model, and the
    pool it makes for each event loop (a notebook's run has its own), load it once per
    process at most, not once each."""
    loads = count_ca_bundle_loads(monkeypatch)
    with ChatCompletionsServer() as server:
        _script(server, runs=3)
        models = [_model(server) for _ in range(3)]
        for model in models:
            assert in_a_cell(_workflow(model)).output == "done"
    assert len(loads) <= 1


def test_a_model_that_made_calls_still_pickles() -> None:
    """Its pools stay behind (they hold live connections); the copy opens its own."""
    with ChatCompletionsServer() as server:
        _script(server, runs=2)
        model = _model(server)
        assert _workflow(model).run("go", store=False).output == "done"
        copy = pickle.loads(pickle.dumps(model))
        assert _workflow(copy).run("go", store=False).output == "done"
        assert copy.base_url == model.base_url


CALL = ToolCall(id="call_1", name="add", arguments={"a": 1, "b": 2, "note": "é ✓"})
RESCUED = ToolCall(id="rescued-1", name="add", arguments={"a": 5, "b": 6}, source="rescued")
HISTORY = [
    Message(role="user", content="Add, please."),
    Message(role="assistant", content="", agent="Calc", tool_calls=[CALL]),
    Message(role="tool", content="3", agent="Calc", tool_call_id="call_1"),
    Message(role="assistant", content="Other.", agent="Helper", tool_calls=[CALL]),
    Message(
        role="assistant",
        content='<tool_call>{"name": "add"}</tool_call>',
        agent="Calc",
        tool_calls=[RESCUED, ToolCall(id="call_2", name="add", arguments={"a": 0, "b": 0})],
    ),
    Message(role="tool", content="11", agent="Calc", tool_call_id="rescued-1"),
    Message(role="tool", content="boom", agent="Calc", tool_call_id="call_x", is_error=True),
]


@pytest.mark.parametrize(
    "options",
    [{}, {"tools_mode": "prompt"}, {"tools_mode": "none"}, {"stream": True}],
    ids=["auto", "prompt", "none", "stream"],
)
def test_what_is_sent_is_what_the_sdks_own_request_building_sends(options: dict[str, Any]) -> None:
    """`render` makes plain JSON values, which the SDK's `maybe_transform` (what
    `chat.completions.create` runs on its arguments) gives back unchanged: posting them as
    they are (`respond` does, through the SDK's `client.post`) sends the request `create`
    would."""
    model = OpenAICompatModel("m", base_url="http://127.0.0.1:9/v1", **options)
    request = ModelRequest(agent="Calc", messages=HISTORY, system="Be exact.", tools=[add.spec])
    params = model.render(request)
    kind = (
        completion_create_params.CompletionCreateParamsStreaming
        if options.get("stream")
        else completion_create_params.CompletionCreateParamsNonStreaming
    )
    assert params["messages"]  # (the history is in it)
    assert maybe_transform(params, kind) == params


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_the_server_gets_the_rendered_request(stream: bool) -> None:
    """The body on the wire is `render(request)`, the history and the tools included,
    streamed or not."""
    with ChatCompletionsServer() as server:
        server.add(Completion("ok"))
        model = _model(server)
        model.stream = stream
        request = ModelRequest(
            agent="Calc", messages=HISTORY[:3], system="Be exact.", tools=[add.spec]
        )
        reply = await model.respond(request)
    assert reply.text == "ok"
    assert server.requests[0].body == model.render(request)
