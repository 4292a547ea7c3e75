"""`record(agent)` for an OpenAI Agents SDK `Agent`: the caller's own `Runner.run` calls as
`Run`s. The real SDK on an offline `agents.Model` written here, and through its real
`OpenAIChatCompletionsModel` against the chat completions server on 127.0.0.1 (non-streamed
and streamed). No model, tool or SDK internal is mocked."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import openai
import pytest
from agents import Agent as SDKAgent
from agents import (
    AgentHooks,
    Model,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    Usage,
    function_tool,
    handoff,
)
from agents_sdk_offline import Answer, _no_trace_export, call, text  # noqa: F401 (fixture)
from chat_completions_server import ChatCompletionsServer, Completion

from thena_nb import Run, Workflow
from thena_nb.frameworks.record import Recording, record
from thena_nb.store import SqliteRunStore


class Scripted(Model):
    """An offline model: `answer(instructions, input items)` gives the response's items;
    every call is counted and what it was given kept."""

    def __init__(self, answer: Answer, *, cache_key: bool = False) -> None:
        self.answer = answer
        self.calls = 0
        self.seen: list[tuple[str | None, list[dict[str, Any]]]] = []
        self.settings: list[ModelSettings] = []
        self.cache_key = cache_key

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: ModelSettings,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        self.calls += 1
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        self.seen.append((system_instructions, items))
        self.settings.append(model_settings)
        await asyncio.sleep(0)  # concurrent runs interleave here
        usage = Usage(requests=1, input_tokens=10 * self.calls, output_tokens=self.calls,
                      total_tokens=11 * self.calls)  # fmt: skip
        return ModelResponse(
            output=self.answer(system_instructions, items), usage=usage, response_id=None
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("these tests stream through the chat completions model")

    def _supports_default_prompt_cache_key(self) -> bool:
        return self.cache_key  # as the SDK's OpenAI models say for OpenAI's own API


def _last_output(items: list[dict[str, Any]]) -> str | None:
    last = items[-1]
    return last.get("output") if last.get("type") == "function_call_output" else None


def _city(items: list[dict[str, Any]]) -> str:
    asked = next(i["content"] for i in items if i.get("role") == "user")
    return str(asked).split()[-1].rstrip("?")


def weather_answer(said: str = "Forecast: ") -> Answer:
    def answer(instructions: str | None, items: list[dict[str, Any]]) -> list[Any]:
        output = _last_output(items)
        if output is None:
            city = _city(items)
            return [call(f"call_{city}", "get_weather", {"city": city})]
        return [text(f"{said}{output}")]

    return answer


class Counter:
    def __init__(self) -> None:
        self.tools: list[str] = []


def weather_agent(
    counter: Counter, *, said: str = "Forecast: ", cache_key: bool = False
) -> tuple[SDKAgent[Any], Scripted]:
    model = Scripted(weather_answer(said), cache_key=cache_key)

    @function_tool(failure_error_function=None)
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        counter.tools.append(city)
        if city == "Nowhere":
            raise RuntimeError("weather service down")
        return f"sunny in {city}"

    agent = SDKAgent(name="Forecaster", instructions="Be brief.", model=model, tools=[get_weather])
    return agent, model


class Told(AgentHooks[Any]):
    """The agent's own hooks: what the SDK told them."""

    def __init__(self) -> None:
        self.events: list[str] = []

    async def on_llm_start(self, context: Any, agent: Any, system: Any, items: Any) -> None:
        self.events.append("llm_start")

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        self.events.append(f"tool_end {result}")

    async def on_end(self, context: Any, agent: Any, output: Any) -> None:
        self.events.append(f"end {output}")


# -- turns, tools, output, tokens -----------------------------------------------------------


def test_each_model_call_is_a_turn_with_its_tools_results_output_and_tokens() -> None:
    counter = Counter()
    agent, model = weather_agent(counter)
    with record(agent, store=False) as rec:
        assert rec.runs == [] and "recording" in repr(rec)
        result = Runner.run_sync(agent, "Weather in Lisbon?")
    assert result.final_output == "Forecast: sunny in Lisbon"
    assert result.last_agent is agent  # the caller's own agent ran
    assert model.calls == 2 and counter.tools == ["Lisbon"]  # nothing was called again
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
        "Scripted",
        "Forecaster/0.Forecaster",
    )
    [done] = first.tool_calls
    assert (done.id, done.name, done.arguments, done.ok, done.result) == (
        "call_Lisbon",
        "get_weather",
        {"city": "Lisbon"},
        True,
        "sunny in Lisbon",
    )
    assert not second.tool_calls and second.info.response == "Forecast: sunny in Lisbon"
    assert [(t.input_tokens, t.output_tokens) for t in run.turns] == [(10, 1), (20, 2)]
    assert run.usage.model_calls == 2 and run.usage.tool_calls == 1
    sent = run.request_of(1)
    assert sent.system == "Be brief."
    assert [m.role for m in sent.messages] == ["user", "assistant", "tool"]
    assert [t.name for t in sent.tools] == ["get_weather"]
    assert sent.tools[0].parameters["properties"]["city"]["type"] == "string"
    assert first.started_at < second.started_at
    assert run.frame()["output_tokens"].tolist() == [1, 2]
    assert repr(rec) == "Recording(OpenAI Agents SDK 'Forecaster', runs=1)"


def test_the_agent_is_put_back_after_the_block_and_its_own_hooks_hear_everything() -> None:
    counter = Counter()
    agent, model = weather_agent(counter)
    told = Told()
    agent.hooks = told
    with record(agent, store=False) as rec:
        Runner.run_sync(agent, "Weather in Lisbon?")
    assert agent.model is model and agent.hooks is told
    assert told.events == ["llm_start", "tool_end sunny in Lisbon", "llm_start",
                           "end Forecast: sunny in Lisbon"]  # fmt: skip
    Runner.run_sync(agent, "Weather in Porto?")
    assert len(rec.runs) == 1 and model.calls == 4  # later runs are not recorded
    with pytest.raises(RuntimeError, match="used already"):
        rec.__enter__()


def test_a_block_that_raises_puts_the_agent_back_and_keeps_the_run() -> None:
    agent, model = weather_agent(Counter())
    with pytest.raises(KeyError), record(agent, store=False) as rec:
        Runner.run_sync(agent, "Weather in Lisbon?")
        raise KeyError("the caller's own error")
    assert agent.model is model and agent.hooks is None
    assert [(r.status, r.output) for r in rec.runs] == [("finished", "Forecast: sunny in Lisbon")]


def test_a_tool_that_raises_fails_the_run_with_its_error_and_the_agent_is_put_back() -> None:
    agent, model = weather_agent(Counter())
    with pytest.raises(Exception, match="weather service down"), record(agent, store=False) as rec:
        Runner.run_sync(agent, "Weather in Nowhere?")
    assert agent.model is model and agent.hooks is None
    [run] = rec.runs
    assert run.status == "failed" and run.error is not None
    assert "weather service down" in run.error
    [turn] = run.turns
    failed = turn.tool_calls[0]
    assert failed.ok is False and "weather service down" in (failed.error or "")


def test_a_run_whose_error_the_caller_caught_inside_the_block_is_unfinished() -> None:
    agent, _ = weather_agent(Counter())
    with record(agent, store=False) as rec:
        with pytest.raises(Exception, match="weather service down"):
            Runner.run_sync(agent, "Weather in Nowhere?")
        Runner.run_sync(agent, "Weather in Lisbon?")
    failed, finished = rec.runs
    assert failed.status == "failed"
    assert failed.error is not None and failed.error.startswith(
        "Unfinished: the OpenAI Agents SDK run did not end inside the `record` block"
    )
    assert failed.turns[0].tool_calls[0].ok is False
    assert (finished.status, finished.output) == ("finished", "Forecast: sunny in Lisbon")


def test_a_model_error_fails_the_run_with_the_models_own_error() -> None:
    def broken(instructions: str | None, items: list[dict[str, Any]]) -> list[Any]:
        raise ConnectionError("model unreachable")

    agent = SDKAgent(name="Broken", model=Scripted(broken))
    with pytest.raises(ConnectionError), record(agent, store=False) as rec:
        Runner.run_sync(agent, "hi")
    [run] = rec.runs
    assert (run.status, run.error, len(run.turns)) == (
        "failed",
        "ConnectionError: model unreachable",
        0,
    )


# -- concurrency, handoffs, the run's own settings ---------------------------------------


def test_concurrent_runs_in_the_block_are_two_runs() -> None:
    counter = Counter()
    agent, _ = weather_agent(counter)

    async def both() -> tuple[Recording, list[Any]]:
        with record(agent, store=False) as rec:  # ends inside the running loop
            results = await asyncio.gather(
                Runner.run(agent, "Weather in Lisbon?"), Runner.run(agent, "Weather in Porto?")
            )
        return rec, results

    rec, results = asyncio.run(both())
    assert [r.final_output for r in results] == [
        "Forecast: sunny in Lisbon",
        "Forecast: sunny in Porto",
    ]
    assert sorted(counter.tools) == ["Lisbon", "Porto"]
    assert sorted((r.input, r.output, len(r.turns)) for r in rec.runs) == [
        ("Weather in Lisbon?", "Forecast: sunny in Lisbon", 2),
        ("Weather in Porto?", "Forecast: sunny in Porto", 2),
    ]
    for run in rec.runs:  # each run's turns are its own
        city = run.input.split()[-1].rstrip("?")
        [done] = run.turns[0].tool_calls
        assert (done.arguments, done.result) == ({"city": city}, f"sunny in {city}")


def test_a_handoff_is_recorded_in_the_run_and_both_agents_are_put_back() -> None:
    def triage_answer(instructions: str | None, items: list[dict[str, Any]]) -> list[Any]:
        return [call("h1", "escalate", {})]

    def specialist_answer(instructions: str | None, items: list[dict[str, Any]]) -> list[Any]:
        return [text("Handled.")]

    specialist_model = Scripted(specialist_answer)
    specialist = SDKAgent(name="Specialist", instructions="Be precise.", model=specialist_model)
    triage_model = Scripted(triage_answer)
    triage = SDKAgent(
        name="Triage", instructions="Route.", model=triage_model,
        handoffs=[handoff(specialist, tool_name_override="escalate")],
    )  # fmt: skip
    with record(triage, store=False) as rec:
        Runner.run_sync(triage, "Help")
        Runner.run_sync(specialist, "Direct")  # not a run of the recorded agent
    assert (triage.model, specialist.model) == (triage_model, specialist_model)
    assert specialist.hooks is None
    [run] = rec.runs
    assert (run.input, run.output) == ("Help", "Handled.")
    assert [t.agent for t in run.turns] == ["Triage", "Triage"]  # turns of the top agent
    assert [run.request_of(k).system for k in (0, 1)] == ["Route.", "Be precise."]
    [handed] = run.turns[0].tool_calls
    assert (handed.name, handed.ok, handed.result) == (
        "escalate",
        True,
        '{"assistant": "Specialist"}',
    )
    again = Workflow.of(triage).run("Help", replay=run, store=False)
    assert again.replay_diverged_at is None and again.output == "Handled."
    assert (triage_model.calls, specialist_model.calls) == (1, 2)


def test_a_run_config_model_is_recorded_from_the_hooks_and_replays_live() -> None:
    counter = Counter()
    agent, own = weather_agent(counter)
    other = Scripted(weather_answer("Other: "))
    with record(agent, store=False) as rec:
        Runner.run_sync(agent, "Weather in Lisbon?", run_config=RunConfig(model=other))
    assert (own.calls, other.calls) == (0, 2)
    [run] = rec.runs
    assert (run.status, run.output, len(run.turns)) == ("finished", "Other: sunny in Lisbon", 2)
    assert run.turns[0].tool_calls[0].result == "sunny in Lisbon"
    assert [t.name for t in run.request_of(0).tools] == ["get_weather"]
    again = Workflow.of(agent).run("Weather in Lisbon?", replay=run, store=False)
    assert again.replay_diverged_at == 0 and own.calls == 2  # keyed differently: live


def test_the_sdks_own_prompt_cache_key_is_still_sent_and_left_out_of_the_key() -> None:
    agent, model = weather_agent(Counter(), cache_key=True)
    with record(agent, store=False) as rec:
        Runner.run_sync(agent, "Weather in Lisbon?")
    sent = [(s.extra_args or {}).get("prompt_cache_key") for s in model.settings]
    assert all(isinstance(k, str) and k.startswith("agents-sdk:") for k in sent)
    again = Workflow.of(agent).run("Weather in Lisbon?", replay=rec.runs[0], store=False)
    assert again.replay_diverged_at is None and model.calls == 2


# -- replay, stores, HTML ------------------------------------------------------------------


def test_a_recorded_run_replays_as_a_step_of_the_same_agent() -> None:
    counter = Counter()
    agent, model = weather_agent(counter)
    with record(agent, store=False) as rec:
        Runner.run_sync(agent, "Weather in Lisbon?")
    [run] = rec.runs
    replayed = Workflow.of(agent).run("Weather in Lisbon?", replay=run, store=False)
    assert (model.calls, counter.tools) == (2, ["Lisbon"])  # no model call, no tool call
    assert replayed.replay_diverged_at is None
    assert [t.replayed for t in replayed.turns] == [True, True]
    assert [t.request_key for t in replayed.turns] == [t.request_key for t in run.turns]
    assert replayed.output == "Forecast: sunny in Lisbon"
    live = Workflow.of(agent).run("Weather in Porto?", replay=run, store=False)
    assert live.replay_diverged_at == 0 and model.calls == 4


def test_runs_are_stored_and_load_back_from_a_sqlite_file(tmp_path: Path) -> None:
    agent, model = weather_agent(Counter())
    with SqliteRunStore(tmp_path / "runs.sqlite3") as store:
        with record(agent, store=store) as rec:
            Runner.run_sync(agent, "Weather in Lisbon?")
        [run] = rec.runs
        loaded = Run.load(run.run_id, store=store)
        again = Workflow.of(agent).run("Weather in Lisbon?", replay=loaded, store=store)
    assert (loaded.status, loaded.input, loaded.output) == (run.status, run.input, run.output)
    assert [t.model_dump() for t in loaded.turns] == [t.model_dump() for t in run.turns]
    assert loaded.turns[0].started_at == run.turns[0].started_at  # the recorded times
    assert loaded.history == run.history
    assert again.replay_diverged_at is None and model.calls == 2


def test_model_text_is_escaped_in_the_html_page(tmp_path: Path) -> None:
    agent, _ = weather_agent(Counter(), said="<script>alert(1)</script>")
    with record(agent, store=False) as rec:
        Runner.run_sync(agent, "Weather in Lisbon?")
    run = rec.runs[0]
    assert run.output == "<script>alert(1)</script>sunny in Lisbon"
    page = run.to_html(tmp_path / "run.html").read_text()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert(1)" not in run._repr_html_()


# -- the SDK's own OpenAI model, over HTTP -------------------------------------------------


def _loopback_agent(server: ChatCompletionsServer, counter: Counter) -> SDKAgent[Any]:
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test-1")
    model = OpenAIChatCompletionsModel(model="qwen2.5:7b", openai_client=client)

    @function_tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        counter.tools.append(city)
        return f"sunny in {city}"

    return SDKAgent(name="Forecaster", instructions="Be brief.", model=model, tools=[get_weather])


SCRIPT = [
    Completion(tool_calls=(("call_1", "get_weather", {"city": "Lisbon"}),)),
    Completion(content="Sunny."),
]


def test_through_the_real_chat_completions_model_against_the_loopback_server() -> None:
    counter = Counter()
    with ChatCompletionsServer(SCRIPT) as server:
        agent = _loopback_agent(server, counter)
        with record(agent, store=False) as rec:
            result = Runner.run_sync(agent, "Weather in Lisbon?")
        assert result.final_output == "Sunny." and len(server.requests) == 2
        [run] = rec.runs
        assert [t.model for t in run.turns] == ["qwen2.5:7b", "qwen2.5:7b"]
        assert (run.turns[0].input_tokens, run.turns[0].output_tokens) == (10, 5)
        [done] = run.turns[0].tool_calls
        assert (done.id, done.arguments, done.result) == (
            "call_1",
            {"city": "Lisbon"},
            "sunny in Lisbon",
        )
        again = Workflow.of(agent).run("Weather in Lisbon?", replay=run, store=False)
        assert again.replay_diverged_at is None and len(server.requests) == 2
        assert counter.tools == ["Lisbon"]
        assert "sk-test-1" not in run.to_json()


def test_a_streamed_run_is_recorded_and_replays() -> None:
    counter = Counter()
    with ChatCompletionsServer(SCRIPT) as server:
        agent = _loopback_agent(server, counter)

        async def streamed() -> Any:
            result = Runner.run_streamed(agent, "Weather in Lisbon?")
            async for _ in result.stream_events():
                pass
            return result

        with record(agent, store=False) as rec:
            result = asyncio.run(streamed())
        assert result.final_output == "Sunny."
        assert all(r.body.get("stream") for r in server.requests)
        [run] = rec.runs
        assert (run.status, run.output) == ("finished", "Sunny.")
        assert [c.result for t in run.turns for c in t.tool_calls] == ["sunny in Lisbon"]
        assert run.turns[1].info.response == "Sunny."
        again = Workflow.of(agent).run("Weather in Lisbon?", replay=run, store=False)
        assert again.replay_diverged_at is None and len(server.requests) == 2


def test_an_agent_with_no_name_is_refused_and_a_name_can_be_given() -> None:
    agent, _ = weather_agent(Counter())
    agent.name = ""
    with pytest.raises(ValueError, match="no name"):
        record(agent)
    with record(agent, name="Helper", store=False) as rec:
        Runner.run_sync(agent, "Weather in Lisbon?")
    assert rec.runs[0].turns[0].agent == "Helper"
