"""`record(agent)`: runs of a framework's agent that the caller makes itself, as `Run`s.

The real frameworks on their own offline models: pydantic-ai's `FunctionModel`, and a
LangGraph agent (`langchain.agents.create_agent`) over a small LangChain chat model that
binds tools. No model, tool or framework internal is mocked."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import ToolException
from langchain_core.tools import tool as lc_tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import ModelRetry
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from thena_nb import Agent, Run, Workflow
from thena_nb.frameworks import _record_langgraph
from thena_nb.frameworks.record import Recording, record
from thena_nb.models import ScriptedModel
from thena_nb.store import MemoryRunStore, SqliteRunStore

# -- pydantic-ai ----------------------------------------------------------------------------


class Counter:
    def __init__(self) -> None:
        self.model = 0
        self.tools: list[str] = []


def weather_agent(counter: Counter, *, said: str = "Forecast: ") -> PydanticAgent[Any, Any]:
    """Asks for the weather, then answers with what the tool said."""

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        counter.model += 1
        last = messages[-1].parts[-1]
        usage = RequestUsage(input_tokens=10 * counter.model, output_tokens=counter.model)
        if last.part_kind == "user-prompt":
            city = str(getattr(last, "content", "")).split()[-1].rstrip("?")
            call = ToolCallPart("get_weather", {"city": city})
            return ModelResponse(parts=[call], usage=usage)
        said_by_tool = getattr(last, "content", "")
        return ModelResponse(parts=[TextPart(f"{said}{said_by_tool}")], usage=usage)

    agent = PydanticAgent(FunctionModel(answer), name="Forecaster", instructions="Be brief.")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        counter.tools.append(city)
        if city == "Atlantis":
            raise ModelRetry("no such city")
        if city == "Nowhere":
            raise RuntimeError("weather service down")
        return f"sunny in {city}"

    return agent


def test_pydantic_ai_each_model_call_is_a_turn_with_its_tools_output_and_tokens() -> None:
    counter = Counter()
    agent = weather_agent(counter)
    with record(agent, store=False) as rec:
        assert rec.runs == [] and "recording" in repr(rec)
        result = agent.run_sync("Weather in Lisbon?")
    assert result.output == "Forecast: sunny in Lisbon"
    assert counter.model == 2 and counter.tools == ["Lisbon"]  # nothing was called again
    [run] = rec.runs
    assert isinstance(run, Run)
    assert (run.status, run.input, run.output) == (
        "finished",
        "Weather in Lisbon?",
        "Forecast: sunny in Lisbon",
    )
    first, second = run.turns
    assert (first.agent, first.model, first.step_path) == (
        "Forecaster",
        "function:answer:",
        "Forecaster/0.Forecaster",
    )
    [call] = first.tool_calls
    assert (call.name, call.arguments, call.ok, call.result) == (
        "get_weather",
        {"city": "Lisbon"},
        True,
        "sunny in Lisbon",
    )
    assert second.info.response == "Forecast: sunny in Lisbon" and not second.tool_calls
    assert [(t.input_tokens, t.output_tokens) for t in run.turns] == [(10, 1), (20, 2)]
    assert run.usage.model_calls == 2 and run.usage.tool_calls == 1
    sent = run.request_of(0)
    assert sent.system == "Be brief."
    assert [m.content for m in sent.messages] == ["Weather in Lisbon?"]
    assert [s.name for s in sent.tools] == ["get_weather"]
    assert [m.role for m in run.request_of(1).messages] == ["user", "assistant", "tool"]
    assert first.started_at < second.started_at and first.duration_s > 0
    assert run.frame()["output_tokens"].tolist() == [1, 2]
    assert repr(rec) == "Recording(pydantic-ai 'Forecaster', runs=1)"


def test_pydantic_ai_agent_is_put_back_after_the_block_and_later_runs_are_not_recorded() -> None:
    counter = Counter()
    agent = weather_agent(counter)
    model = agent.model
    with record(agent, store=False) as rec:
        agent.run_sync("Weather in Lisbon?")
    assert agent.model is model and agent._override_model.get() is None
    agent.run_sync("Weather in Porto?")
    assert len(rec.runs) == 1 and counter.model == 4
    with pytest.raises(RuntimeError, match="used already"):
        rec.__enter__()


def test_pydantic_ai_block_that_raises_puts_the_agent_back_and_keeps_the_failed_run() -> None:
    agent = weather_agent(Counter())
    with (
        pytest.raises(RuntimeError, match="weather service down"),
        record(agent, store=False) as rec,
    ):
        agent.run_sync("Weather in Nowhere?")
    assert agent._override_model.get() is None
    [run] = rec.runs
    assert run.status == "failed"
    assert run.error == "RuntimeError: weather service down"
    [turn] = run.turns
    assert turn.tool_calls[0].ok is False  # its tool raised: the run ended there


def test_pydantic_ai_model_retry_is_a_failed_call_with_what_the_model_was_told() -> None:
    agent = weather_agent(Counter())
    with record(agent, store=False) as rec:
        agent.run_sync("Weather in Atlantis?")
    [run] = rec.runs
    call = run.turns[0].tool_calls[0]
    assert (call.ok, call.error) == (False, "no such city")
    assert run.turns[0].info.tool_error is True
    assert run.output == "Forecast: no such city"


def test_pydantic_ai_model_error_fails_the_run_with_the_frameworks_error() -> None:
    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ConnectionError("model unreachable")

    agent = PydanticAgent(FunctionModel(broken), name="Broken")
    with pytest.raises(ConnectionError), record(agent, store=False) as rec:
        agent.run_sync("hi")
    [run] = rec.runs
    assert (run.status, run.error, len(run.turns)) == (
        "failed",
        "ConnectionError: model unreachable",
        0,
    )


def test_pydantic_ai_concurrent_runs_in_the_block_are_two_runs() -> None:
    agent = weather_agent(Counter())

    async def both() -> tuple[Recording, Any]:
        with record(agent, store=False) as rec:  # ends inside the running loop
            results = await asyncio.gather(
                agent.run("Weather in Lisbon?"), agent.run("Weather in Porto?")
            )
        return rec, results

    rec, results = asyncio.run(both())
    assert [r.output for r in results] == ["Forecast: sunny in Lisbon", "Forecast: sunny in Porto"]
    assert sorted((r.input, r.output, len(r.turns)) for r in rec.runs) == [
        ("Weather in Lisbon?", "Forecast: sunny in Lisbon", 2),
        ("Weather in Porto?", "Forecast: sunny in Porto", 2),
    ]
    for run in rec.runs:  # each run's turns are its own
        city = run.input.split()[-1].rstrip("?")
        assert run.turns[0].tool_calls[0].arguments == {"city": city}


def test_pydantic_ai_recorded_run_replays_as_a_step_of_the_same_agent() -> None:
    counter = Counter()
    agent = weather_agent(counter)
    with record(agent, store=False) as rec:
        agent.run_sync("Weather in Lisbon?")
    assert counter.model == 2
    replayed = Workflow.of(agent).run("Weather in Lisbon?", replay=rec.runs[0], store=False)
    assert counter.model == 2 and counter.tools == ["Lisbon"]  # no model call, no tool call
    assert [t.replayed for t in replayed.turns] == [True, True]
    assert replayed.replay_diverged_at is None
    assert replayed.output == "Forecast: sunny in Lisbon"
    live = Workflow.of(agent).run("Weather in Porto?", replay=rec.runs[0], store=False)
    assert live.replay_diverged_at == 0 and counter.model == 4


def test_pydantic_ai_runs_are_stored_and_load_back_from_a_sqlite_file(tmp_path: Path) -> None:
    agent = weather_agent(Counter())
    with SqliteRunStore(tmp_path / "runs.sqlite3") as store:
        with record(agent, store=store) as rec:
            agent.run_sync("Weather in Lisbon?")
        [run] = rec.runs
        loaded = Run.load(run.run_id, store=store)
    assert (loaded.status, loaded.input, loaded.output) == (run.status, run.input, run.output)
    assert [t.model_dump() for t in loaded.turns] == [t.model_dump() for t in run.turns]
    assert loaded.turns[0].started_at == run.turns[0].started_at  # the recorded times
    assert loaded.started_at == run.started_at
    assert loaded.history == run.history


def test_default_store_is_used_when_no_store_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "default.sqlite3"
    monkeypatch.setenv("THENA_NB_STORE", str(path))
    agent = weather_agent(Counter())
    with record(agent) as rec:
        agent.run_sync("Weather in Lisbon?")
    with SqliteRunStore(path) as store:
        assert Run.load(rec.runs[0].run_id, store=store).output == "Forecast: sunny in Lisbon"


def test_diff_of_two_recorded_runs_finds_the_changed_input() -> None:
    agent = weather_agent(Counter())
    with record(agent, store=False) as rec:
        agent.run_sync("Weather in Lisbon?")
        agent.run_sync("Weather in Porto?")
    a, b = rec.runs
    assert a.diff(a).first_divergence is None
    found = a.diff(b).first_divergence
    assert found is not None and found.cause == "message"


def test_model_text_is_escaped_in_the_html_page(tmp_path: Path) -> None:
    agent = weather_agent(Counter(), said="<script>alert(1)</script>")
    with record(agent, store=False) as rec:
        agent.run_sync("Weather in Lisbon?")
    page = rec.runs[0].to_html(tmp_path / "run.html").read_text()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert(1)" not in rec.runs[0]._repr_html_()


def test_record_refuses_what_it_cannot_hold_and_asks_for_a_name() -> None:
    with pytest.raises(TypeError, match="`record` takes a pydantic-ai `Agent` or a compiled"):
        record(object())
    native = Agent("A", model=ScriptedModel(["hi"]))
    with pytest.raises(TypeError, match=r"Workflow.of\(agent\).run"):
        record(native)
    nameless = PydanticAgent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("x")])))
    with pytest.raises(ValueError, match="no name"):
        record(nameless)
    with record(nameless, name="Helper", store=False) as rec:
        nameless.run_sync("go")
    assert rec.runs[0].turns[0].agent == "Helper"
    modelless = PydanticAgent(name="NoModel")
    with pytest.raises(TypeError, match="no model of its own"), record(modelless, store=False):
        pass
    assert modelless._override_model.get() is None


def test_a_block_with_no_run_records_nothing() -> None:
    with record(weather_agent(Counter()), store=MemoryRunStore()) as rec:
        pass
    assert rec.runs == [] and isinstance(rec, Recording)


# -- LangGraph ------------------------------------------------------------------------------


class WeatherChat(BaseChatModel):
    """A chat model that binds tools: asks for the weather, then says what the tool said."""

    said: str = "Forecast: "

    @property
    def _llm_type(self) -> str:
        return "weather-chat"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            usage = {"input_tokens": 30, "output_tokens": 5, "total_tokens": 35}
            message = AIMessage(content=f"{self.said}{last.content}", usage_metadata=usage)
        else:
            city = str(last.content).split()[-1].rstrip("?")
            call = {"name": "get_weather", "args": {"city": city}, "id": f"call_{city}"}
            usage = {"input_tokens": 20, "output_tokens": 3, "total_tokens": 23}
            message = AIMessage(content="", tool_calls=[call], usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=message)])


@lc_tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    if city == "Nowhere":
        raise ToolException("weather service down")
    if city == "Void":
        raise RuntimeError("the tool crashed")
    return f"sunny in {city}"


get_weather.handle_tool_error = True  # a `ToolException` becomes an error `ToolMessage`


def weather_graph(said: str = "Forecast: ") -> Any:
    return create_agent(
        WeatherChat(said=said), tools=[get_weather], system_prompt="Be brief.", name="Forecaster"
    )


def test_langgraph_each_chat_model_call_is_a_turn_with_tools_output_and_tokens() -> None:
    graph = weather_graph()
    with record(graph, store=False) as rec:
        out = graph.invoke({"messages": [("user", "Weather in Lisbon?")]})
    assert out["messages"][-1].content == "Forecast: sunny in Lisbon"
    [run] = rec.runs
    assert (run.status, run.input, run.output) == (
        "finished",
        "Weather in Lisbon?",
        "Forecast: sunny in Lisbon",
    )
    first, _ = run.turns
    assert (first.agent, first.model) == ("Forecaster", "weather-chat")
    [call] = first.tool_calls
    assert (call.id, call.name, call.arguments, call.ok, call.result) == (
        "call_Lisbon",
        "get_weather",
        {"city": "Lisbon"},
        True,
        "sunny in Lisbon",
    )
    assert [(t.input_tokens, t.output_tokens) for t in run.turns] == [(20, 3), (30, 5)]
    sent = run.request_of(0)
    assert sent.system == "Be brief." and [s.name for s in sent.tools] == ["get_weather"]
    assert sent.tools[0].parameters["properties"] == {"city": {"type": "string"}}
    assert repr(rec) == "Recording(LangGraph 'Forecaster', runs=1)"


def test_langgraph_tool_error_is_a_failed_call_with_the_graphs_message() -> None:
    graph = weather_graph()
    with record(graph, store=False) as rec:
        graph.invoke({"messages": [("user", "Weather in Nowhere?")]})
    call = rec.runs[0].turns[0].tool_calls[0]
    assert call.ok is False and call.error is not None and "weather service down" in call.error
    assert rec.runs[0].turns[0].info.tool_error is True
    assert rec.runs[0].status == "finished"


def test_langgraph_graph_that_raises_is_a_failed_run_with_its_error() -> None:
    graph = weather_graph()
    with pytest.raises(RuntimeError, match="the tool crashed"), record(graph, store=False) as rec:
        graph.invoke({"messages": [("user", "Weather in Void?")]})
    [run] = rec.runs
    assert (run.status, run.error) == ("failed", "RuntimeError: the tool crashed")
    call = run.turns[0].tool_calls[0]
    assert (call.ok, call.error) == (False, "RuntimeError: the tool crashed")


def test_langgraph_callbacks_are_removed_after_the_block_also_when_it_raises() -> None:
    graph = weather_graph()
    with pytest.raises(KeyError), record(graph, store=False) as rec:
        graph.invoke({"messages": [("user", "Weather in Lisbon?")]})
        raise KeyError("the caller's own error")
    assert _record_langgraph._ACTIVE.get() is None
    assert [r.status for r in rec.runs] == ["finished"]  # it ended before the block raised
    graph.invoke({"messages": [("user", "Weather in Porto?")]})
    assert len(rec.runs) == 1
    other = weather_graph()
    with record(other, store=False) as rec2:
        graph.invoke({"messages": [("user", "Weather in Porto?")]})  # another graph object
    assert len(rec2.runs) == 1  # same name: runs are told apart by the graph's name


def test_langgraph_concurrent_invocations_are_two_runs() -> None:
    graph = weather_graph()

    async def both() -> Recording:
        with record(graph, store=False) as rec:
            await asyncio.gather(
                graph.ainvoke({"messages": [("user", "Weather in Lisbon?")]}),
                graph.ainvoke({"messages": [("user", "Weather in Porto?")]}),
            )
        return rec

    rec = asyncio.run(both())
    assert sorted((r.input, r.output) for r in rec.runs) == [
        ("Weather in Lisbon?", "Forecast: sunny in Lisbon"),
        ("Weather in Porto?", "Forecast: sunny in Porto"),
    ]
    assert all(len(r.turns) == 2 for r in rec.runs)


def test_langgraph_store_round_trip_diff_and_escaped_html(tmp_path: Path) -> None:
    graph = weather_graph(said="<script>x</script>")
    with SqliteRunStore(tmp_path / "runs.sqlite3") as store:
        with record(graph, store=store) as rec:
            graph.invoke({"messages": [("user", "Weather in Lisbon?")]})
            graph.invoke({"messages": [("user", "Weather in Porto?")]})
        a, b = rec.runs
        loaded = Run.load(a.run_id, store=store)
    assert loaded.output == a.output == "<script>x</script>sunny in Lisbon"
    assert [t.model_dump() for t in loaded.turns] == [t.model_dump() for t in a.turns]
    found = a.diff(b).first_divergence
    assert found is not None and found.cause == "message"
    page = a.to_html(tmp_path / "run.html").read_text()
    assert "<script>x</script>" not in page and "&lt;script&gt;x&lt;/script&gt;" in page


def test_langgraph_recorded_run_as_a_replay_is_never_served_half_matched() -> None:
    """A LangGraph step keys its requests its own way (`frameworks/langgraph.py`): a
    recorded run either replays whole or goes live from turn 0, said by
    `replay_diverged_at`; it is never served for a request it did not record."""
    graph = weather_graph()
    with record(graph, store=False) as rec:
        graph.invoke({"messages": [("user", "Weather in Lisbon?")]})
    again = Workflow.of(graph).run("Weather in Lisbon?", replay=rec.runs[0], store=False)
    replayed = [t.replayed for t in again.turns]
    assert (again.replay_diverged_at, replayed) in ((None, [True, True]), (0, [False, False]))
    assert again.output == "Forecast: sunny in Lisbon"
