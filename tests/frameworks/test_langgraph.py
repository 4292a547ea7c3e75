"""A compiled LangGraph graph as a thena_nb step: agents from `create_agent` and hand-built
`StateGraph`s with a `ToolNode`, on LangChain's own offline chat model classes and through
`langchain_openai.ChatOpenAI` against the chat completions server on 127.0.0.1. One turn per
chat model call; replay, fork, diff, gates, stepping, stores, experiments."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from chat_completions_server import ChatCompletionsServer, Completion
from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.caches import InMemoryCache
from langchain_core.globals import get_llm_cache, set_llm_cache
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import BaseModel

from thena_nb import Decision, Message, Run, Workflow, loop, parallel, until_answered
from thena_nb.core.engine.foreign import ForeignAgent
from thena_nb.frameworks.langgraph import LangGraphStep
from thena_nb.store import MemoryRunStore, SqliteRunStore

Answer = Callable[[list[BaseMessage]], AIMessage]


class Offline(BaseChatModel):
    """An offline chat model that answers from the messages it is sent (`answer`), binds
    tools as OpenAI's format, and counts its calls."""

    answer: Any
    counter: Any = None
    delay: float = 0.0

    @property
    def _llm_type(self) -> str:
        return "offline"

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _answer(self, messages: list[BaseMessage]) -> ChatResult:
        if self.counter is not None:
            self.counter.model += 1
            self.counter.seen.append(list(messages))
        message = self.answer(messages)
        message.usage_metadata = {"input_tokens": 11, "output_tokens": 7, "total_tokens": 18}
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:  # fmt: skip
        return self._answer(messages)

    async def _agenerate(self, messages: list[BaseMessage], stop: Any = None,
                         run_manager: Any = None, **kwargs: Any) -> ChatResult:  # fmt: skip
        if self.delay:
            await asyncio.sleep(self.delay)
        return self._answer(messages)


class Counter:
    def __init__(self) -> None:
        self.model = 0
        self.seen: list[list[BaseMessage]] = []
        self.tools: list[str] = []


def _calls_so_far(messages: list[BaseMessage]) -> int:
    return sum(len(m.tool_calls) for m in messages if isinstance(m, AIMessage))


def weather_answer(messages: list[BaseMessage]) -> AIMessage:
    """Asks for the weather, then answers with what the tool said."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(f"Forecast: {last.content}")
    n = _calls_so_far(messages) + 1
    call = {"name": "get_weather", "args": {"city": "Lisbon"}, "id": f"call_{n}"}
    return AIMessage("", tool_calls=[call])


def weather_tool(counter: Counter) -> BaseTool:
    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        counter.tools.append(city)
        return f"sunny in {city}"

    return get_weather


def agent(counter: Counter, answer: Answer = weather_answer, **kwargs: Any) -> Any:
    """A `create_agent` agent on the offline model with the weather tool."""
    model = Offline(answer=answer, counter=counter)
    kwargs.setdefault("system_prompt", "Be brief.")
    return create_agent(model, [weather_tool(counter)], name="Forecaster", **kwargs)


def hand_built(counter: Counter, *, asynchronous: bool = False, **tool_node: Any) -> Any:
    """A `StateGraph(MessagesState)`: a node that calls the chat model, a `ToolNode`."""
    llm = Offline(answer=weather_answer, counter=counter).bind_tools([weather_tool(counter)])

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke([SystemMessage("Be brief."), *state["messages"]])]}

    async def acall_model(state: MessagesState) -> dict[str, Any]:
        sent = [SystemMessage("Be brief."), *state["messages"]]
        return {"messages": [await llm.ainvoke(sent)]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", acall_model if asynchronous else call_model)
    builder.add_node("tools", ToolNode([weather_tool(counter)], **tool_node))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(name="Forecaster")


@pytest.fixture(autouse=True)
def _no_global_cache() -> Iterator[None]:
    before = get_llm_cache()
    yield
    assert get_llm_cache() is before  # the step's cache is LangChain's only while it runs


# -- the step --------------------------------------------------------------------------------


def test_workflow_of_names_the_step_after_the_graph() -> None:
    wf = Workflow.of(agent(Counter()))
    assert wf.name == "Forecaster"
    step = wf.steps[0]
    assert isinstance(step, LangGraphStep) and isinstance(step, ForeignAgent)
    assert (step.framework, step.model.name) == ("LangGraph", "Offline")
    unnamed = create_agent(GenericFakeChatModel(messages=iter([AIMessage("hi")])))
    assert unnamed.name == "LangGraph"  # LangGraph's default: not a name the user gave
    with pytest.raises(ValueError, match="no name.*name='Forecaster'"):
        Workflow.of(unnamed)
    assert Workflow.of(unnamed, name="Helper").steps[0].name == "Helper"
    with pytest.raises(ValueError, match="changeable fields: name"):
        step.replace(system="Say more.")
    assert step.replace(name="Other").name == "Other"


def test_one_turn_per_model_call_with_the_tools_the_graph_ran() -> None:
    counter = Counter()
    run = Workflow.of(agent(counter)).run("Weather in Lisbon?", store=False)
    assert run.status == "finished"
    assert run.output == "Forecast: sunny in Lisbon"
    assert counter.model == 2 and counter.tools == ["Lisbon"]
    first, second = run.turns
    assert (first.agent, first.model) == ("Forecaster", "Offline")
    [call] = first.tool_calls
    assert (call.id, call.name, call.arguments, call.ok, call.result) == (
        "call_1",
        "get_weather",
        {"city": "Lisbon"},
        True,
        "sunny in Lisbon",
    )
    assert first.info.called_tool and not second.info.called_tool
    assert second.info.response == "Forecast: sunny in Lisbon"
    assert (first.input_tokens, first.output_tokens) == (11, 7)
    # what the model was sent: the system prompt, the history, the tools it was bound to
    sent = run.request_of(1)
    assert sent.system == "Be brief."
    assert [m.role for m in sent.messages] == ["user", "assistant", "tool"]
    assert [t.name for t in sent.tools] == ["get_weather"]
    assert sent.tools[0].parameters["properties"] == {"city": {"type": "string"}}
    seen = counter.seen[1]
    assert [type(m).__name__ for m in seen] == [
        "SystemMessage",
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
    ]
    wire = run.wire_request_of(1)
    assert [m["type"] for m in wire["messages"]] == ["system", "human", "ai", "tool"]
    assert wire["messages"][2]["data"]["tool_calls"][0]["id"] == "call_1"
    assert wire["tools"][0]["function"]["name"] == "get_weather"


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync-node", "async-node"])
def test_a_hand_built_state_graph_with_a_tool_node(asynchronous: bool) -> None:
    counter = Counter()
    wf = Workflow.of(hand_built(counter, asynchronous=asynchronous))
    run = wf.run("Weather in Lisbon?", store=False)
    assert run.output == "Forecast: sunny in Lisbon"
    assert [len(t.tool_calls) for t in run.turns] == [1, 0]
    assert run.turns[0].tool_calls[0].result == "sunny in Lisbon"
    assert run.request_of(0).system == "Be brief."
    assert [t.name for t in run.request_of(0).tools] == ["get_weather"]
    assert (counter.model, counter.tools) == (2, ["Lisbon"])
    again = wf.run("Weather in Lisbon?", replay=run, store=False)
    assert (counter.model, counter.tools) == (2, ["Lisbon"])
    assert again.replay_diverged_at is None and again.output == run.output


def test_an_agent_that_is_a_node_of_a_bigger_graph() -> None:
    counter = Counter()
    outer = StateGraph(MessagesState)
    outer.add_node("forecaster", agent(counter))  # its ToolNode is held there too
    outer.add_edge(START, "forecaster")
    wf = Workflow.of(outer.compile(name="Outer"), gate=["get_weather"])
    run = wf.run("Weather?", approve=lambda p: Decision.edit({"city": "Porto"}), store=False)
    assert run.output == "Forecast: sunny in Porto" and counter.tools == ["Porto"]
    assert [t.agent for t in run.turns] == ["Outer", "Outer"]
    again = wf.run("Weather?", replay=run, store=False)
    assert again.replay_diverged_at is None and (counter.model, counter.tools) == (2, ["Porto"])


def test_replay_makes_no_model_call_and_no_tool_call() -> None:
    counter = Counter()
    wf = Workflow.of(agent(counter))
    run = wf.run("Weather in Lisbon?", store=False)
    assert (counter.model, counter.tools) == (2, ["Lisbon"])
    again = wf.run("Weather in Lisbon?", replay=run, store=False)
    assert (counter.model, counter.tools) == (2, ["Lisbon"])
    assert again.replay_diverged_at is None
    assert [t.replayed for t in again.turns] == [True, True]
    assert again.output == run.output
    assert [t.request_key for t in again.turns] == [t.request_key for t in run.turns]
    assert again.turns[0].tool_calls[0].result == "sunny in Lisbon"
    other = wf.run("Weather in Porto?", replay=run, store=False)
    assert other.replay_diverged_at == 0 and counter.model == 4


def test_fork_with_a_tool_result_a_reply_and_an_injected_message() -> None:
    from thena_nb.models import reply

    counter = Counter()
    wf = Workflow.of(agent(counter))
    run = wf.run("Weather in Lisbon?", store=False)

    rainy = run.fork(0, tool_results={"call_1": "rain"}, store=False)
    assert rainy.output == "Forecast: rain"
    assert counter.tools == ["Lisbon"]  # the forked result was given, the tool not run again
    assert counter.model == 3  # only the turn after the fork went live
    assert rainy.turns[0].tool_calls[0].decision == "respond"

    porto = run.fork(0, reply=reply.tool("get_weather", city="Porto"), store=False)
    assert porto.output == "Forecast: sunny in Porto"
    assert counter.tools == ["Lisbon", "Porto"]  # the edited reply's call ran live
    assert porto.turns[0].attempts == 0 and counter.model == 4

    def heed(messages: list[BaseMessage]) -> AIMessage:
        if any(isinstance(m, HumanMessage) and "Celsius" in str(m.content) for m in messages):
            return AIMessage("22 C")
        return weather_answer(messages)

    counter2 = Counter()
    wf2 = Workflow.of(agent(counter2, heed))
    first = wf2.run("Weather in Lisbon?", store=False)
    told = first.fork(1, inject=[Message(role="user", content="Answer in Celsius.")], store=False)
    assert told.output == "22 C"
    assert [t.replayed for t in told.turns] == [True, False]
    assert counter2.tools == ["Lisbon"] and counter2.model == 3
    last = counter2.seen[-1]
    assert [type(m).__name__ for m in last][-2:] == ["ToolMessage", "HumanMessage"]
    assert told.request_of(1).messages[-1].content == "Answer in Celsius."
    again = wf2.run("Weather in Lisbon?", replay=told, store=False)
    assert again.replay_diverged_at is None and again.output == "22 C"
    assert counter2.model == 3


def test_diff_finds_where_two_runs_part() -> None:
    wf = Workflow.of(agent(Counter()))
    run = wf.run("Weather in Lisbon?", store=False)
    same = wf.run("Weather in Lisbon?", store=False)
    assert run.diff(same).first_divergence is None
    rainy = run.fork(0, tool_results={"call_1": "rain"}, store=False)
    found = run.diff(rainy).first_divergence
    assert found is not None and found.cause == "tool_result" and found.turn_a == 0


# -- gates -----------------------------------------------------------------------------------


def test_gates_approve_edit_reject_and_respond_count_the_tools_real_calls() -> None:
    counter = Counter()
    wf = Workflow.of(agent(counter), gate=["get_weather"])

    approved = wf.run("Weather in Lisbon?", approve=lambda p: Decision.approve(), store=False)
    assert counter.tools == ["Lisbon"] and approved.output == "Forecast: sunny in Lisbon"
    assert approved.turns[0].tool_calls[0].decision == "approve"

    edited = wf.run(
        "Weather in Lisbon?", approve=lambda p: Decision.edit({"city": "Porto"}), store=False
    )
    assert counter.tools == ["Lisbon", "Porto"]
    done = edited.turns[0].tool_calls[0]
    assert (done.decision, done.arguments, done.original_arguments, done.result) == (
        "edit",
        {"city": "Porto"},
        {"city": "Lisbon"},
        "sunny in Porto",
    )
    assert edited.output == "Forecast: sunny in Porto"
    calls = counter.model
    again = wf.run("Weather in Lisbon?", replay=edited, store=False)
    assert again.replay_diverged_at is None and counter.model == calls
    assert again.output == edited.output and counter.tools == ["Lisbon", "Porto"]

    rejected = wf.run("Weather in Lisbon?", approve=lambda p: Decision.reject("no"), store=False)
    assert counter.tools == ["Lisbon", "Porto"]  # the tool did not run
    assert rejected.turns[0].tool_calls[0].ok is False
    assert "no" in rejected.output
    told = counter.seen[-1][-1]
    assert isinstance(told, ToolMessage) and told.status == "error" and "no" in told.content

    answered = wf.run("Weather in Lisbon?", approve=lambda p: Decision.respond("hail"), store=False)
    assert counter.tools == ["Lisbon", "Porto"]
    assert answered.output == "Forecast: hail"
    assert answered.turns[0].tool_calls[0].decision == "respond"


def test_two_calls_in_one_turn_each_decided_and_reported_in_call_order() -> None:
    def both(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            said = [str(m.content) for m in messages if isinstance(m, ToolMessage)]
            return AIMessage(" / ".join(said))
        calls = [
            {"name": "get_weather", "args": {"city": city}, "id": f"call_{city}"}
            for city in ("Lisbon", "Porto")
        ]
        return AIMessage("", tool_calls=calls)

    counter = Counter()
    wf = Workflow.of(agent(counter, both), gate=lambda call: call.arguments["city"] == "Porto")
    run = wf.run("Both?", approve=lambda p: Decision.reject("not Porto"), store=False)
    assert counter.tools == ["Lisbon"]
    lisbon, porto = run.turns[0].tool_calls
    assert (lisbon.id, lisbon.ok, lisbon.result, lisbon.decision) == (
        "call_Lisbon",
        True,
        "sunny in Lisbon",
        None,
    )
    assert (porto.id, porto.ok, porto.decision) == ("call_Porto", False, "reject")
    assert run.output.startswith("sunny in Lisbon / ") and "not Porto" in run.output
    again = wf.run("Both?", replay=run, store=False)
    assert again.replay_diverged_at is None and counter.tools == ["Lisbon"]
    assert again.output == run.output


def test_a_gate_without_a_decision_waits_and_resumes() -> None:
    counter = Counter()
    wf = Workflow.of(agent(counter), gate=True)
    store = MemoryRunStore()
    waiting = wf.run("Weather in Lisbon?", store=store)
    assert waiting.status == "waiting" and counter.tools == []
    [pending] = waiting.pending
    assert (pending.call.id, pending.call.name) == ("call_1", "get_weather")
    done = wf.resume(
        waiting.run_id, store=store, decisions={"call_1": Decision.edit({"city": "Faro"})}
    )
    assert done.status == "finished"
    assert done.output == "Forecast: sunny in Faro"
    assert counter.tools == ["Faro"]
    assert counter.model == 2  # the waiting turn's reply was kept, not asked again


def test_interrupt_before_tools_is_a_thena_nb_gate() -> None:
    counter = Counter()
    graph = agent(counter, interrupt_before=["tools"])
    wf = Workflow.of(graph)  # no gate= : the graph's own stop before its tools
    edited = wf.run("pay", approve=lambda p: Decision.edit({"city": "Porto"}), store=False)
    assert edited.status == "finished" and counter.tools == ["Porto"]
    assert edited.turns[0].tool_calls[0].decision == "edit"
    waiting = wf.run("pay", store=MemoryRunStore())
    assert waiting.status == "waiting" and counter.tools == ["Porto"]


# -- stepping, stores, failures ----------------------------------------------------------------


def test_a_session_steps_one_model_call_at_a_time_and_pauses_before_tools() -> None:
    counter = Counter()
    wf = Workflow.of(agent(counter))

    async def walk() -> list[Any]:
        s = wf.session("Weather in Lisbon?")
        seen: list[Any] = []
        s.pause_before_tools = True
        first = await s.step()  # the model answered; paused before its tool runs
        seen.append((first, s.paused_at, counter.model, list(counter.tools)))
        s.pause_before_tools = False
        turn = await s.step()  # the tool ran, then the turn was recorded
        seen.append((turn.index if turn else None, counter.model, list(counter.tools)))
        rest = await s.run()
        seen.append((rest.status, len(rest.turns), counter.model))
        return seen

    paused, stepped, ended = asyncio.run(walk())
    assert paused == (None, "tools", 1, [])
    assert stepped == (0, 1, ["Lisbon"])  # paused again before the second model call
    assert ended == ("finished", 2, 2)


def test_a_stopped_session_resumes_replaying_what_it_had() -> None:
    counter = Counter()
    wf = Workflow.of(agent(counter))
    store = MemoryRunStore()

    async def cut() -> Run:
        s = wf.session("Weather in Lisbon?", store=store)
        await s.step()  # turn 0, then paused before the second model call
        s.stop()
        return await s.run()

    stopped = asyncio.run(cut())
    assert stopped.status == "stopped" and len(stopped.turns) == 1
    assert counter.model == 1
    done = wf.resume(stopped.run_id, store=store)
    assert done.status == "finished" and done.output == "Forecast: sunny in Lisbon"
    assert [t.replayed for t in done.turns] == [True, False]
    assert counter.model == 2 and counter.tools == ["Lisbon"]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_runs_are_stored_and_load_back(kind: str, tmp_path: Path) -> None:
    counter = Counter()
    wf = Workflow.of(agent(counter))
    store: Any = MemoryRunStore() if kind == "memory" else SqliteRunStore(tmp_path / "runs.sqlite3")
    try:
        run = wf.run("Weather in Lisbon?", store=store)
        loaded = Run.load(run.run_id, store=store)
        assert loaded.output == run.output == "Forecast: sunny in Lisbon"
        assert [t.request_key for t in loaded.turns] == [t.request_key for t in run.turns]
        assert loaded.turns[0].tool_calls[0].result == "sunny in Lisbon"
        assert loaded.request_of(1).system == "Be brief."
        again = wf.run("Weather in Lisbon?", replay=loaded, store=store)
        assert again.replay_diverged_at is None and counter.model == 2
        forked = loaded.fork(0, tool_results={"call_1": "fog"}, workflow=wf, store=store)
        assert forked.output == "Forecast: fog" and counter.tools == ["Lisbon"]
    finally:
        if kind == "sqlite":
            store.close()


def _fails_then_reads(messages: list[BaseMessage]) -> AIMessage:
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(f"Sorry: {last.content}")
    return AIMessage("", tool_calls=[{"name": "explode", "args": {}, "id": "call_x"}])


@tool
def explode() -> str:
    """Always fails."""
    raise RuntimeError("kaboom")


def test_a_tool_that_raises_is_a_failed_call_the_model_reads() -> None:
    llm = Offline(answer=_fails_then_reads).bind_tools([explode])
    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {"messages": [llm.invoke(state["messages"])]})
    builder.add_node("tools", ToolNode([explode], handle_tool_errors=True))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    wf = Workflow.of(builder.compile(), name="Boom")
    run = wf.run("go", store=False)
    [failed] = run.turns[0].tool_calls
    assert failed.ok is False
    assert failed.error == "Error: RuntimeError('kaboom')\n Please fix your mistakes."
    assert failed.traceback and "kaboom" in failed.traceback
    assert run.output == f"Sorry: {failed.error}"
    assert run.turns[0].info.tool_error
    again = wf.run("go", replay=run, store=False)
    assert again.replay_diverged_at is None and again.turns[0].tool_calls[0].ok is False


def test_a_tool_that_raises_through_the_tool_node_fails_the_run_and_keeps_its_turn() -> None:
    graph = create_agent(Offline(answer=_fails_then_reads), [explode], name="Boom")
    with pytest.raises(RuntimeError, match="kaboom") as caught:
        Workflow.of(graph).run("go", store=False)
    partial = caught.value.run  # type: ignore[attr-defined]
    assert partial.status == "failed"
    [turn] = partial.turns
    assert turn.tool_calls[0].ok is False
    assert "kaboom" in (turn.tool_calls[0].traceback or "")


def test_a_model_error_fails_the_run() -> None:
    def broken(messages: list[BaseMessage]) -> AIMessage:
        raise ConnectionError("the model is down")

    graph = create_agent(Offline(answer=broken), name="Down")
    with pytest.raises(ConnectionError, match="down") as caught:
        Workflow.of(graph).run("go", store=False)
    assert caught.value.run.status == "failed"  # type: ignore[attr-defined]


# -- what is refused -------------------------------------------------------------------------


def test_unsupported_graphs_are_refused_saying_what_is_supported() -> None:
    from langgraph.func import entrypoint

    @entrypoint()
    def plain(text: str) -> str:
        return text.upper()

    with pytest.raises(ValueError, match="no `messages` in its state.*create_agent"):
        Workflow.of(plain, name="Plain")

    builder = StateGraph(MessagesState)
    builder.add_node("echo", lambda state: {"messages": [AIMessage("echo")]})
    builder.add_edge(START, "echo")
    with pytest.raises(ValueError, match="without a chat model call.*ToolNode"):
        Workflow.of(builder.compile(name="Echo")).run("hi", store=False)

    uncached = Offline(answer=weather_answer, cache=False)
    with pytest.raises(ValueError, match="cache=False.*create_agent"):
        Workflow.of(create_agent(uncached, name="Uncached")).run("hi", store=False)

    with pytest.raises(TypeError, match="a compiled LangGraph graph"):
        Workflow.of(StateGraph(MessagesState))

    from langgraph.types import interrupt

    def ask(state: MessagesState) -> dict[str, Any]:
        interrupt("go on?")
        return {}

    llm = Offline(answer=lambda messages: AIMessage("hi"))
    asking = StateGraph(MessagesState)
    asking.add_node("agent", lambda state: {"messages": [llm.invoke(state["messages"])]})
    asking.add_node("ask", ask)
    asking.add_edge(START, "agent")
    asking.add_edge("agent", "ask")
    with pytest.raises(ValueError, match="interrupt.*gate="):
        Workflow.of(asking.compile(name="Asker")).run("hi", store=False)


def test_a_tool_run_outside_a_tool_node_is_refused() -> None:
    counter = Counter()
    get_weather = weather_tool(counter)
    llm = Offline(answer=weather_answer).bind_tools([get_weather])

    def by_hand(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        return {"messages": [get_weather.invoke(c) for c in last.tool_calls]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {"messages": [llm.invoke(state["messages"])]})
    builder.add_node("tools", by_hand)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    with pytest.raises(ValueError, match="ran outside a `ToolNode`"):
        Workflow.of(builder.compile(name="ByHand")).run("hi", store=False)
    assert counter.tools == []


# -- around the step -------------------------------------------------------------------------


def test_beside_native_agents_the_history_flows_both_ways() -> None:
    from thena_nb import Agent
    from thena_nb.models import ScriptedModel

    counter = Counter()
    planner = Agent("Planner", model=ScriptedModel(["Check Lisbon."]))
    checker_model = ScriptedModel(["Looks right."])
    checker = Agent("Checker", model=checker_model)
    run = Workflow("trip", [planner, agent(counter), checker]).run("Plan", store=False)
    assert [t.agent for t in run.turns] == ["Planner", "Forecaster", "Forecaster", "Checker"]
    assert [type(m).__name__ for m in counter.seen[0]] == [
        "SystemMessage",
        "HumanMessage",
        "HumanMessage",
    ]
    assert counter.seen[0][2].content == "[Planner] Check Lisbon."
    seen = checker_model.requests[0].messages
    assert any(m.agent == "Forecaster" and "sunny" in m.content for m in seen)
    assert [s.kind for s in Workflow("p", [parallel([agent(Counter())])]).steps] == ["parallel"]
    looped = Workflow(
        "l", [loop(steps=[agent(Counter())], until=until_answered, max_iterations=2)]
    ).run("Weather?", store=False)
    assert looped.loops[0].stop_reason == "until"


class Forecast(BaseModel):
    city: str
    sky: str


@dataclass
class Where:
    city: str


@tool
def sky(runtime: ToolRuntime[Where]) -> str:
    """The sky over the city of the run's context."""
    return f"clear over {runtime.context.city}"


def test_structured_output_and_context() -> None:
    def answer(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage):
            return AIMessage("", tool_calls=[{"name": "sky", "args": {}, "id": "call_1"}])
        said = {"city": "Lisbon", "sky": str(last.content)}
        return AIMessage("", tool_calls=[{"name": "Forecast", "args": said, "id": "call_2"}])

    graph = create_agent(
        Offline(answer=answer), [sky], response_format=Forecast, context_schema=Where,
        name="Typed",
    )  # fmt: skip
    wf = Workflow.of(graph)
    run = wf.run("Lisbon?", deps=Where("Lisbon"), store=False)
    assert run.output == Forecast(city="Lisbon", sky="clear over Lisbon")
    final = run.turns[-1].tool_calls[0]
    assert (final.name, final.ok) == ("Forecast", True)  # the output's call is a call that worked
    again = wf.run("Lisbon?", deps=Where("Lisbon"), replay=run, store=False)
    assert again.replay_diverged_at is None and again.output == run.output


def _echo(messages: list[BaseMessage]) -> AIMessage:
    asked = next(str(m.content) for m in messages if isinstance(m, HumanMessage))
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(f"said {last.content}")
    return AIMessage("", tool_calls=[{"name": "echo", "args": {"text": asked}, "id": "call_1"}])


@tool
def echo(text: str) -> str:
    """Says the text back."""
    return text


def test_an_experiments_runs_of_one_graph_at_once_keep_to_their_own_calls() -> None:
    graph = create_agent(Offline(answer=_echo, delay=0.01), [echo], name="Echo")
    inputs = [f"case {i}" for i in range(3)]
    exp = Workflow.of(graph).map(inputs, concurrency=3, store=False)
    outputs = {r.input: r.output for r in exp.runs}
    assert outputs == {i: f"said {i}" for i in inputs}
    for r in exp.runs:
        assert r.turns[0].tool_calls[0].arguments == {"text": r.input}


def test_scored_repeats_and_reused_experiments() -> None:
    from thena_nb import Case, scorers

    store = MemoryRunStore()
    graph = create_agent(Offline(answer=_echo), [echo], name="Echo")
    exp = Workflow.of(graph).map(
        [Case("hello", expected="said hello")],
        scorers=[scorers.contains(), scorers.no_failed_tools()],
        repeats=2,
        store=store,
    )
    frame = exp.frame()
    assert len(frame) == 2 and set(frame["status"]) == {"finished"}
    assert frame.filter(like="contains").iloc[:, 0].eq(1.0).all()
    same = create_agent(Offline(answer=_echo), [echo], name="Echo")
    again = Workflow.of(same).map([Case("hello", expected="said hello")], repeats=2, store=store)
    assert again.reused == 2  # the same graph, described the same way: its runs are reused
    other = create_agent(Offline(answer=_echo), [echo], name="Echo", system_prompt="Be brief.")
    assert Workflow.of(other).map([Case("hello")], store=store).reused == 0


def test_the_page_of_a_run_escapes_the_models_text(tmp_path: Path) -> None:
    def shout(messages: list[BaseMessage]) -> AIMessage:
        return AIMessage("<script>alert('x')</script> <b>Sunny</b>")

    run = Workflow.of(create_agent(Offline(answer=shout), name="Sky")).run(
        "<i>Weather</i>?", store=False
    )
    page = run.to_html(tmp_path / "run.html").read_text()
    assert "<script>alert('x')</script>" not in page and "<b>Sunny</b>" not in page
    assert "<i>Weather</i>" not in page
    assert "&lt;b&gt;Sunny&lt;/b&gt;" in page or "\\u003cb\\u003eSunny" in page
    assert list(run.frame()["agent"]) == ["Sky"]


def test_a_users_global_llm_cache_keeps_serving_calls_outside_the_step() -> None:
    cache = InMemoryCache()
    set_llm_cache(cache)
    try:
        counter = Counter()
        wf = Workflow.of(agent(counter))
        wf.run("Weather in Lisbon?", store=False)
        wf.run("Weather in Lisbon?", store=False)
        assert counter.model == 4  # a step's calls are its turns, not the user's cache hits
        assert get_llm_cache() is cache
        plain = Offline(answer=lambda m: AIMessage("hi"), counter=counter)
        plain.invoke("hello")
        plain.invoke("hello")
        assert counter.model == 5  # outside the step, the user's cache answers
    finally:
        set_llm_cache(None)


def test_through_chat_openai_against_the_loopback_server() -> None:
    from langchain_openai import ChatOpenAI

    script = [
        Completion(tool_calls=(("call_1", "get_weather", {"city": "Lisbon"}),)),
        Completion(content="Sunny."),
    ]
    counter = Counter()
    with ChatCompletionsServer(script) as server:
        model = ChatOpenAI(model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test-1")
        wf = Workflow.of(
            create_agent(model, [weather_tool(counter)], system_prompt="Be brief.",
                         name="Forecaster")
        )  # fmt: skip
        assert wf.steps[0].model.name == "gpt-4o-mini"
        run = wf.run("Weather in Lisbon?", store=False)
        assert run.output == "Sunny."
        assert [t.model for t in run.turns] == ["gpt-4o-mini", "gpt-4o-mini"]
        [done] = run.turns[0].tool_calls
        assert (done.id, done.arguments, done.result) == (
            "call_1",
            {"city": "Lisbon"},
            "sunny in Lisbon",
        )
        assert (run.turns[0].input_tokens, run.turns[0].output_tokens) == (10, 5)
        assert all(t.cost_usd and t.cost_usd > 0 for t in run.turns)  # priced as OpenAI's
        body = server.requests[1].body
        assert body["messages"][0] == {"role": "system", "content": "Be brief."}
        assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool"]
        assert body["tools"][0]["function"]["name"] == "get_weather"
        sent = len(server.requests)
        again = wf.run("Weather in Lisbon?", replay=run, store=False)
        assert len(server.requests) == sent and again.replay_diverged_at is None
        assert counter.tools == ["Lisbon"]
        assert again.cost_usd == 0
        assert "sk-test-1" not in run.to_json()


def test_continue_with_replays_the_conversation_and_answers_the_follow_up() -> None:
    counter = Counter()
    run = Workflow.of(agent(counter)).run("Weather in Lisbon?", store=False)
    more = run.continue_with("And tomorrow?", store=False)
    assert [t.replayed for t in more.turns] == [True, True, False, False]
    assert counter.model == 4 and counter.tools == ["Lisbon", "Lisbon"]
    assert [type(m).__name__ for m in counter.seen[2]][-2:] == ["AIMessage", "HumanMessage"]
    assert [m.content for m in more.history if m.role == "user"] == [
        "Weather in Lisbon?",
        "And tomorrow?",
    ]


def test_a_streaming_models_text_reaches_listeners_live_and_not_replayed() -> None:
    from langchain_openai import ChatOpenAI

    with ChatCompletionsServer([Completion(content="Sunny in Lisbon today.")] * 2) as server:
        model = ChatOpenAI(
            model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test-1", streaming=True
        )
        wf = Workflow.of(create_agent(model, name="Sky"))

        async def listen(replay: Run | None) -> tuple[Run, list[str], list[str]]:
            s = wf.session("Weather?", replay=replay)
            kinds: list[str] = []
            pieces: list[str] = []
            s.subscribe(lambda e: kinds.append(e.kind))
            s.subscribe(lambda e: pieces.append(e.text) if e.kind == "text_delta" else None)
            return await s.run(), kinds, pieces

        run, kinds, pieces = asyncio.run(listen(None))
        assert run.output == "Sunny in Lisbon today."
        assert len(pieces) > 1 and "".join(pieces) == "Sunny in Lisbon today."
        assert kinds.index("text_delta") < kinds.index("turn_finished")
        again, _, replayed = asyncio.run(listen(run))
        assert again.replay_diverged_at is None and again.output == run.output
        assert replayed == [] and len(server.requests) == 1


@pytest.mark.anyio
async def test_the_stepper_steps_a_graph_one_model_call_at_a_time() -> None:
    import ipywidgets as widgets

    from thena_nb.notebook import Stepper

    hostile = "<script>window.__pwned = 1</script> & done"

    def answer(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage(hostile)
        return weather_answer(messages)

    async def click(button: widgets.Button, stepper: Stepper) -> Any:
        button.click()
        assert stepper.task is not None
        return await stepper.task

    stepper = Workflow.of(agent(Counter(), answer)).stepper("Weather in Lisbon?")
    stepper.chart_delay = 0
    turn = await click(stepper.step_button, stepper)
    assert turn.index == 0 and stepper.status == "paused"
    panel = stepper.turn_html.value
    assert "<code>get_weather</code>" in panel and "sunny in Lisbon" in panel
    await click(stepper.step_button, stepper)
    assert stepper.status == "finished" and stepper.turn_count == 2
    shown = stepper.turn_html.value
    assert "<script>" not in shown and "&lt;script&gt;" in shown


def test_thena_nb_spans_cover_the_graphs_turns() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from thena_nb import telemetry

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.instrument(provider)
    try:
        Workflow.of(agent(Counter())).run("Weather in Lisbon?", store=False)
    finally:
        telemetry.uninstrument()
    names = [s.name for s in exporter.get_finished_spans()]
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    assert len(chats) == 2, names  # one per chat model call
    assert chats[0].attributes["gen_ai.usage.input_tokens"] == 11
    assert [n for n in names if n.startswith("execute_tool")] == ["execute_tool get_weather"]


def test_a_release_outside_the_supported_range_says_which(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib import metadata

    from thena_nb import frameworks

    real = metadata.version
    monkeypatch.setattr(
        frameworks.metadata,
        "version",
        lambda dist: "0.6.2" if dist == "langgraph" else real(dist),
    )
    with pytest.raises(ImportError, match=r"supports langgraph from 1\.0.*0\.6\.2"):
        Workflow.of(agent(Counter()))
