"""What `respond` sends is `render(request)`, although it maps only the messages that are new
since an earlier request of the run (`_wire.Resumes`): over random multi-agent histories
that grow, get edited and interleave, and through the real SDK to the 127.0.0.1 server."""

from __future__ import annotations

import gc
import random
from typing import Any, ClassVar

import pytest
from chat_completions_server import ChatCompletionsServer, Completion
from hypothesis import given, settings
from hypothesis import strategies as st
from messages_api_server import MessagesAPIServer, text, thinking, thinking_block, tool_use

from thena_nb import Agent, Workflow, loop, tool
from thena_nb.core.records.model import ModelRequest
from thena_nb.core.records.types import HistoryView, Message, ToolCall
from thena_nb.models._wire import Resumes
from thena_nb.models.anthropic import AnthropicModel
from thena_nb.models.openai_compat import OpenAICompatModel

pytestmark = pytest.mark.anyio

AGENTS = (None, "Scout", "Broker")
IDS = ("call_0", "call_1", "call_2")  # few ids, so that they repeat


def _message(rng: random.Random) -> Message:
    """A random message: any role, author, text (empty and blank too), native and rescued
    calls with ids that repeat, results that answer a call, another, or none."""
    role = rng.choice(("user", "assistant", "assistant", "tool", "tool"))
    agent = rng.choice(AGENTS)
    content = rng.choice(("", "  ", "ok", "Checking.", "two\nlines", f"n{rng.randrange(99)}"))
    if role == "assistant":
        calls = [
            ToolCall(
                id=rng.choice(IDS),
                name=rng.choice(("get_weather", "get_fares")),
                arguments={"city": rng.choice(("Lisbon", "Porto"))},
                source=rng.choice(("native", "native", "rescued")),
            )
            for _ in range(rng.choice((0, 0, 1, 2)))
        ]
        thought = [thinking_block(f"t{rng.randrange(9)}")] if rng.random() < 0.3 else []
        return Message(
            role="assistant",
            content=content,
            agent=agent,
            tool_calls=calls,
            reasoning_blocks=thought,
        )
    if role == "tool":
        return Message(
            role="tool",
            content=content,
            agent=agent,
            tool_call_id=rng.choice((*IDS, None)),
            is_error=rng.random() < 0.2,
        )
    return Message(role="user", content=content, agent=agent)


def _model(tools_mode: Any = "auto") -> OpenAICompatModel:
    return OpenAICompatModel("m", base_url="http://127.0.0.1:9/v1", tools_mode=tools_mode)


MODELS = {
    "openai": lambda: _model(),
    "openai-prompt": lambda: _model("prompt"),
    "anthropic": lambda: AnthropicModel("claude-test", api_key="k"),
    "anthropic-thinking": lambda: AnthropicModel(
        "claude-test", api_key="k", thinking={"type": "enabled", "budget_tokens": 2048}
    ),
    "anthropic-no-cache": lambda: AnthropicModel("claude-test", api_key="k", cache=False),
}


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(sorted(MODELS)))
def test_resumed_map_equals_a_whole_map(seed: int, kind: str) -> None:
    """Several histories share one model (runs of an experiment, the agents of a run): each
    grows by a few messages a request, sometimes from an earlier point with other messages
    (a fork, an edit), sometimes as a new list of the same messages; every request's
    body is what mapping its whole history gives."""
    rng = random.Random(seed)
    model: Any = MODELS[kind]()
    histories: list[list[Message]] = [[Message(role="user", content="Go.")] for _ in range(3)]
    histories.append([_message(rng)])  # one that may start with the model's own message
    for _ in range(40):
        h = rng.randrange(len(histories))
        history = histories[h]
        if rng.random() < 0.1 and len(history) > 2:  # forked or edited from an earlier message
            history = histories[h] = history[: rng.randrange(1, len(history))]
        history.extend(_message(rng) for _ in range(rng.choice((1, 2, 2, 3))))
        shown: Any = rng.choice((history, HistoryView(history), list(history), tuple(history)))
        request = ModelRequest(agent=rng.choice(AGENTS[1:]), system="Be brief.", messages=shown)
        sent = model._params(request, resumed=True)
        assert sent == model.render(request)
    for history in histories:  # the kept states were never changed by what came after
        request = ModelRequest(agent="Scout", messages=list(history))
        assert model._params(request, resumed=True) == model.render(request)


def test_a_request_maps_only_its_new_messages() -> None:
    """The second request of a growing history maps from the last assistant message of the
    first: message objects before it are not read again."""

    class Counted(Message):
        reads: ClassVar[int] = 0

        def __getattribute__(self, name: str) -> Any:
            if name == "role":
                type(self).reads += 1
            return super().__getattribute__(name)

    history: list[Message] = [Counted(role="user", content="Go.")]
    for i in range(50):
        call = ToolCall(id=f"c{i}", name="get_weather", arguments={"city": "Lisbon"})
        history.append(Counted(role="assistant", content="", tool_calls=[call]))
        history.append(Counted(role="tool", content="sunny", tool_call_id=f"c{i}"))
    model = _model()
    model._params(ModelRequest(agent="A", messages=HistoryView(history)), resumed=True)
    first = Counted.reads
    call = ToolCall(id="c50", name="get_weather", arguments={"city": "Porto"})
    history += [
        Counted(role="assistant", content="", tool_calls=[call]),
        Counted(role="tool", content="rain", tool_call_id="c50"),
    ]
    Counted.reads = 0
    request = ModelRequest(agent="A", messages=HistoryView(history))
    sent = model._params(request, resumed=True)
    assert first > len(history) - 2  # the first request read them all
    assert Counted.reads <= 12  # the last assistant message of before, and what followed
    assert sent == model.render(request)
    assert sent["messages"][-1] == {"role": "tool", "tool_call_id": "c50", "content": "rain"}


def test_resumes_keep_the_newest_states() -> None:
    """A state is found only for the options it was kept with, and the oldest go first."""
    resumes: Resumes[int] = Resumes(size=2)
    histories = [[Message(role="user", content=str(i))] for i in range(3)]
    for i, history in enumerate(histories):
        resumes.keep(history, 0, i, "A", True)
    assert resumes.find(histories[0], "A", True) is None  # pushed out
    assert resumes.find(histories[1], "A", True) == (0, 1)
    assert resumes.find(histories[2], "A", False) is None
    assert resumes.find(histories[2], "B", True) is None
    assert resumes.find([], "A", True) is None
    resumes.clear()
    assert resumes.find(histories[2], "A", True) is None


def test_a_state_goes_with_its_history() -> None:
    """A kept state lives only as long as its history's first message: a run let go takes
    it along (no run's messages are kept alive by the model)."""
    resumes: Resumes[str] = Resumes()
    history = [Message(role="user", content="Hi"), Message(role="assistant", content="Yo")]
    other = [Message(role="user", content="Hey"), Message(role="assistant", content="Yo")]
    resumes.keep(history, 1, "first", "A")
    resumes.keep(other, 1, "other", "A")
    assert len(resumes) == 2
    del history
    assert len(resumes) == 1
    assert resumes.find(other, "A") == (1, "other")


def test_a_copied_model_keeps_no_states() -> None:
    """A pickled copy (a Ray worker's) starts with no kept state, and maps alike."""
    import pickle

    model = _model()
    request = ModelRequest(
        agent="A",
        messages=[Message(role="user", content="Hi"), Message(role="assistant", content="Yo")],
    )
    sent = model._params(request, resumed=True)
    copy = pickle.loads(pickle.dumps(model))
    assert copy._resumes.find(list(request.messages), "A", True) is None
    assert copy._params(request, resumed=True) == sent


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


@tool
def get_fares(city: str) -> str:
    """Train fares to a city."""
    return f"12 EUR to {city}"


async def test_every_body_of_a_multi_agent_run_is_its_render() -> None:
    """Two agents share one model and a loop: native, rescued and repeated call ids, text
    turns. Every body the server received is `wire_request_of` its turn (a whole render)."""
    written = '<tool_call>\n{"name": "get_fares", "arguments": {"city": "Faro"}}\n</tool_call>'
    script = []
    for i in range(6):
        script += [
            Completion(tool_calls=(("call_0", "get_weather", {"city": f"City{i}"}),)),
            Completion(written if i % 2 else f"Fares next ({i})."),
        ]
    script += [Completion("Sunny."), Completion("Done.")]
    with ChatCompletionsServer(script) as server:
        model = OpenAICompatModel("qwen3:8b", base_url=server.base_url, timeout=5.0)
        scout = Agent("Scout", model=model, tools=[get_weather])
        broker = Agent("Broker", model=model, tools=[get_fares])
        done = loop(
            steps=[scout, broker], until=lambda ctx: ctx.output == "Done.", max_iterations=7
        )
        wf = Workflow("trip", [done])
        run = await wf.arun("Plan a trip.", store=False)
    assert run.status == "finished", run.error
    assert len(run.turns) == len(server.requests) == 14
    for k, received in enumerate(server.requests):
        assert received.body == run.wire_request_of(k), k
    # (the loop did what the script says: native calls, rescued calls, attributed text)
    assert {t.info.tool_call_source for t in run.turns} == {"native", "rescued", None}
    assert any(
        m["role"] == "user" and m["content"].startswith("[Broker]")
        for m in server.requests[-2].messages
    )
    assert len(model._resumes) == 2  # one for each agent
    del run
    gc.collect()
    assert len(model._resumes) == 0  # gone with the run


async def test_every_body_of_an_anthropic_run_is_its_render(api_server: MessagesAPIServer) -> None:
    """The same through `AnthropicModel` with thinking on: the server checks each body as
    the API would (roles, tool blocks, signed thinking sent back, cache breakpoints), and
    each equals `wire_request_of` its turn."""
    for i in range(6):
        api_server.script(
            thinking(f"Weather {i}?", tool_use("get_weather", {"city": f"City{i}"})),
            thinking(f"Fares {i}?", text(f"Fares next ({i}).")),
        )
    api_server.script(thinking("Sum up.", text("Sunny.")), thinking("End.", text("Done.")))
    model = AnthropicModel(
        "claude-test",
        base_url=api_server.base_url,
        api_key="k",
        thinking={"type": "enabled", "budget_tokens": 2048},
    )
    scout = Agent("Scout", model=model, tools=[get_weather], max_tokens=4096)
    broker = Agent("Broker", model=model, tools=[get_fares], max_tokens=4096)
    done = loop(steps=[scout, broker], until=lambda ctx: ctx.output == "Done.", max_iterations=7)
    run = await Workflow("trip", [done]).arun("Plan a trip.", store=False)
    assert run.status == "finished", run.error
    assert not api_server.rejected, api_server.rejected
    assert len(run.turns) == len(api_server.bodies) == 14
    for k, body in enumerate(api_server.bodies):
        assert body == run.wire_request_of(k), k
    marked = [
        block
        for body in api_server.bodies
        for message in body["messages"]
        for block in message["content"]
        if "cache_control" in block
    ]
    assert len(marked) == 14  # one breakpoint a request, on its last block only
