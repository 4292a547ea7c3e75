"""`record(agent)` for a smolagents `ToolCallingAgent` or `CodeAgent`: the caller's own
`agent.run(...)` calls as `Run`s. The real framework on an offline `Model` written here (it
answers from the messages it is given, with `ChatMessage` tool calls), and through its real
`OpenAIServerModel` (streamed) against the chat completions server on 127.0.0.1. No model,
tool or framework internal is mocked."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from chat_completions_server import ChatCompletionsServer, Completion
from smol_offline import QUIET, Answer, call, observation, said
from smolagents import (
    ActionStep,
    ChatMessage,
    CodeAgent,
    Model,
    OpenAIServerModel,
    ToolCallingAgent,
    tool,
)
from smolagents.models import MessageRole
from smolagents.monitoring import TokenUsage

from thena_nb import Run, Workflow
from thena_nb.frameworks.record import record
from thena_nb.store import SqliteRunStore


def task(messages: list[Any]) -> str:
    return said(messages[1]).removeprefix("New task:\n")


class Offline(Model):
    """An offline smolagents model: `answer(messages)` gives the message; every call is
    counted."""

    def __init__(self, answer: Answer, model_id: str = "offline") -> None:
        super().__init__(model_id=model_id)
        self.answer = answer
        self.calls = 0
        self._lock = threading.Lock()

    def generate(
        self,
        messages: list[Any],
        stop_sequences: list[str] | None = None,
        response_format: Any = None,
        tools_to_call_from: list[Any] | None = None,
        **kwargs: Any,
    ) -> ChatMessage:
        with self._lock:
            self.calls += 1
            n = self.calls
        message = self.answer(list(messages))
        message.token_usage = TokenUsage(input_tokens=10 * n, output_tokens=n)
        return message


def weather_answer(prefix: str = "Forecast: ") -> Answer:
    def answer(messages: list[Any]) -> ChatMessage:
        seen = observation(messages)
        if seen is None:
            city = task(messages).split()[-1].rstrip("?")
            return call(f"call_{city}", "get_weather", city=city)
        return call("call_end", "final_answer", answer=f"{prefix}{seen}")

    return answer


class Counter:
    def __init__(self) -> None:
        self.cities: list[str] = []


def weather_agent(
    counter: Counter, answer: Answer | None = None, *, model: Any = None, **kwargs: Any
) -> tuple[ToolCallingAgent, Any]:
    model = model or Offline(answer or weather_answer())

    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city.

        Args:
            city: The city.
        """
        counter.cities.append(city)
        if city == "Nowhere":
            raise RuntimeError("weather service down")
        return f"sunny in {city}"

    kwargs.setdefault("name", "Forecaster")
    agent = ToolCallingAgent(
        tools=[get_weather], model=model, instructions="Be brief.", verbosity_level=QUIET,
        **kwargs,
    )  # fmt: skip
    return agent, model


def held(agent: Any) -> dict[str, Any]:
    """What the block may hold on the agent, to check it is put back."""
    return {
        "model": agent.model,
        "step_callbacks": agent.step_callbacks,
        "executor": getattr(agent, "python_executor", None),
        "own": "execute_tool_call" in vars(agent),
    }


# -- ToolCallingAgent -------------------------------------------------------------------------


def test_each_model_call_is_a_turn_with_its_tools_results_output_and_tokens() -> None:
    counter = Counter()
    agent, model = weather_agent(counter)
    with record(agent, store=False) as rec:
        assert "recording" in repr(rec)
        output = agent.run("Weather in Lisbon?")
    assert output == "Forecast: sunny in Lisbon"
    assert model.calls == 2 and counter.cities == ["Lisbon"]  # nothing was called again
    [run] = rec.runs
    assert (run.status, run.input, run.output) == (
        "finished",
        "Weather in Lisbon?",
        "Forecast: sunny in Lisbon",
    )
    first, second = run.turns
    assert (first.agent, first.model, first.step_path) == (
        "Forecaster",
        "offline",
        "Forecaster/0.Forecaster",
    )
    [done] = first.tool_calls
    assert (done.id, done.name, done.arguments, done.source, done.ok, done.result) == (
        "call_Lisbon",
        "get_weather",
        {"city": "Lisbon"},
        "native",
        True,
        "sunny in Lisbon",
    )
    [final] = second.tool_calls
    assert (final.name, final.arguments, final.result) == (
        "final_answer",
        {"answer": "Forecast: sunny in Lisbon"},
        "Forecast: sunny in Lisbon",
    )
    assert [(t.input_tokens, t.output_tokens) for t in run.turns] == [(10, 1), (20, 2)]
    assert run.usage.model_calls == 2 and run.usage.tool_calls == 2
    sent = run.request_of(1)
    assert "Be brief." in sent.system
    assert [m.role for m in sent.messages] == ["user", "assistant", "tool"]
    assert sorted(t.name for t in sent.tools) == ["final_answer", "get_weather"]
    assert first.started_at < second.started_at
    assert run.frame()["output_tokens"].tolist() == [1, 2]
    assert repr(rec) == "Recording(smolagents 'Forecaster', runs=1)"


def test_the_agent_is_put_back_after_the_block_and_its_own_callbacks_still_run() -> None:
    counter = Counter()
    steps: list[int] = []
    agent, model = weather_agent(counter, step_callbacks=[lambda s: steps.append(s.step_number)])
    before = held(agent)
    with record(agent, store=False) as rec:
        agent.run("Weather in Lisbon?")
        agent.run("Weather in Porto?")  # runs one after another: two runs
    assert held(agent) == before
    assert steps == [1, 2, 1, 2]
    assert [(r.input, r.output) for r in rec.runs] == [
        ("Weather in Lisbon?", "Forecast: sunny in Lisbon"),
        ("Weather in Porto?", "Forecast: sunny in Porto"),
    ]
    agent.run("Weather in Faro?")
    assert len(rec.runs) == 2 and model.calls == 6  # later runs are not recorded
    with pytest.raises(RuntimeError, match="used already"):
        rec.__enter__()


def test_a_block_that_raises_puts_the_agent_back_and_keeps_the_run() -> None:
    agent, _ = weather_agent(Counter())
    before = held(agent)
    with pytest.raises(KeyError), record(agent, store=False) as rec:
        agent.run("Weather in Lisbon?")
        raise KeyError("the caller's own error")
    assert held(agent) == before
    assert [(r.status, r.output) for r in rec.runs] == [("finished", "Forecast: sunny in Lisbon")]


def test_a_model_error_fails_the_run_with_the_models_own_error() -> None:
    class Down(Exception):
        pass

    def answer(messages: list[Any]) -> ChatMessage:
        if observation(messages) is None:
            return call("call_1", "get_weather", city="Lisbon")
        raise Down("the model is down")

    agent, _ = weather_agent(Counter(), answer)
    before = held(agent)
    with pytest.raises(Exception, match="the model is down"), record(agent, store=False) as rec:
        agent.run("Weather in Lisbon?")
    assert held(agent) == before
    [run] = rec.runs
    assert (run.status, run.error, len(run.turns)) == ("failed", "Down: the model is down", 1)
    assert run.turns[0].tool_calls[0].result == "sunny in Lisbon"


def test_a_tool_that_raises_is_a_failed_call_with_what_smolagents_told_the_model() -> None:
    agent, _ = weather_agent(Counter())
    with record(agent, store=False) as rec:
        agent.run("Weather in Nowhere?")
    [run] = rec.runs
    failed = run.turns[0].tool_calls[0]
    assert failed.ok is False and run.turns[0].info.tool_error
    assert failed.error is not None
    assert failed.error.startswith("Error executing tool 'get_weather' with arguments")
    assert "RuntimeError: weather service down" in failed.error
    assert run.output == f"Forecast: {failed.error}"  # exactly what the model read
    again = Workflow.of(agent).run("Weather in Nowhere?", replay=run, store=False)
    assert again.replay_diverged_at is None and again.output == run.output


def test_two_calls_in_one_turn_keep_their_own_results() -> None:
    def answer(messages: list[Any]) -> ChatMessage:
        seen = observation(messages)
        if seen is None:
            calls = [
                {"id": f"c_{city}", "type": "function",
                 "function": {"name": "get_weather", "arguments": {"city": city}}}
                for city in ("Lisbon", "Porto")
            ]  # fmt: skip
            return ChatMessage(role=MessageRole.ASSISTANT, content=None, tool_calls=calls)
        return call("call_end", "final_answer", answer=seen)

    counter = Counter()
    agent, _ = weather_agent(counter, answer)
    with record(agent, store=False) as rec:
        agent.run("Both?")  # smolagents runs the two calls on its own threads
    assert sorted(counter.cities) == ["Lisbon", "Porto"]
    assert [(c.id, c.result) for c in rec.runs[0].turns[0].tool_calls] == [
        ("c_Lisbon", "sunny in Lisbon"),
        ("c_Porto", "sunny in Porto"),
    ]


def test_a_call_written_as_text_is_a_rescued_call_and_replays() -> None:
    def answer(messages: list[Any]) -> ChatMessage:
        seen = observation(messages)
        if seen is None:
            text = '{"name": "get_weather", "arguments": {"city": "Lisbon"}}'
            return ChatMessage(role=MessageRole.ASSISTANT, content=text)
        return call("call_2", "final_answer", answer=seen)

    counter = Counter()
    agent, model = weather_agent(counter, answer)
    with record(agent, store=False) as rec:
        agent.run("Weather?")
    [rescued] = rec.runs[0].turns[0].tool_calls
    assert (rescued.source, rescued.name, rescued.result) == (
        "rescued",
        "get_weather",
        "sunny in Lisbon",
    )
    again = Workflow.of(agent).run("Weather?", replay=rec.runs[0], store=False)
    assert again.replay_diverged_at is None and model.calls == 2 and counter.cities == ["Lisbon"]


# -- replay, stores, HTML ------------------------------------------------------------------


def test_a_recorded_run_replays_as_a_step_of_the_same_agent() -> None:
    counter = Counter()
    agent, model = weather_agent(counter)
    with record(agent, store=False) as rec:
        agent.run("Weather in Lisbon?")
    [run] = rec.runs
    replayed = Workflow.of(agent).run("Weather in Lisbon?", replay=run, store=False)
    assert (model.calls, counter.cities) == (2, ["Lisbon"])  # no model call, no tool call
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
            agent.run("Weather in Lisbon?")
        [run] = rec.runs
        loaded = Run.load(run.run_id, store=store)
        again = Workflow.of(agent).run("Weather in Lisbon?", replay=loaded, store=store)
    assert (loaded.status, loaded.input, loaded.output) == (run.status, run.input, run.output)
    assert [t.model_dump() for t in loaded.turns] == [t.model_dump() for t in run.turns]
    assert loaded.turns[0].started_at == run.turns[0].started_at  # the recorded times
    assert loaded.history == run.history
    assert again.replay_diverged_at is None and model.calls == 2


def test_model_text_is_escaped_in_the_html_page(tmp_path: Path) -> None:
    agent, _ = weather_agent(Counter(), weather_answer("<script>alert(1)</script>"))
    with record(agent, store=False) as rec:
        agent.run("Weather in Lisbon?")
    run = rec.runs[0]
    assert run.output == "<script>alert(1)</script>sunny in Lisbon"
    page = run.to_html(tmp_path / "run.html").read_text()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert(1)" not in run._repr_html_()


# -- CodeAgent -------------------------------------------------------------------------------


def code_agent(counter: Counter, *, fail: bool = False) -> tuple[CodeAgent, Offline]:
    """Asks for the weather in code, then answers it in capitals; `fail`: runs code that
    raises in between, then gives up."""

    def answer(messages: list[Any]) -> ChatMessage:
        seen = observation(messages)
        if seen is None:
            code = "w = get_weather(city='Lisbon')\nprint(w)"
        elif "ZeroDivisionError" in seen:
            code = "final_answer('gave up')"
        elif fail:
            code = "1 / 0"
        else:
            code = "final_answer(w.upper())"
        text = f"Thought: next.\n<code>\n{code}\n</code>"
        return ChatMessage(role=MessageRole.ASSISTANT, content=text)

    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city.

        Args:
            city: The city.
        """
        counter.cities.append(city)
        return f"sunny in {city}"

    model = Offline(answer)
    return CodeAgent(tools=[get_weather], model=model, name="Coder", verbosity_level=QUIET), model


def test_a_code_agent_records_its_code_as_the_call_and_its_result() -> None:
    counter = Counter()
    agent, model = code_agent(counter, fail=True)
    before = held(agent)
    with record(agent, store=False) as rec:
        assert agent.run("Weather in Lisbon?") == "gave up"
    assert held(agent) == before
    [run] = rec.runs
    assert (run.status, run.output, model.calls) == ("finished", "gave up", 3)
    ran, failed, final = (t.tool_calls[0] for t in run.turns)
    assert (ran.id, ran.name, ran.arguments) == (
        "call_1",
        "python_interpreter",
        {"code": "w = get_weather(city='Lisbon')\nprint(w)"},
    )
    assert ran.ok and ran.result == (
        "Execution logs:\nsunny in Lisbon\nLast output from code snippet:\nNone"
    )
    assert (failed.id, failed.arguments) == ("call_2", {"code": "1 / 0"})
    assert failed.ok is False and "ZeroDivisionError" in (failed.error or "")
    assert final.arguments == {"code": "final_answer('gave up')"}
    assert run.turns[0].info.response.startswith("Thought: next.")
    assert [t.name for t in run.request_of(0).tools] == ["python_interpreter"]


def test_a_recorded_code_agent_run_replays_without_the_model() -> None:
    counter = Counter()
    agent, model = code_agent(counter)
    with record(agent, store=False) as rec:
        assert agent.run("Weather in Lisbon?") == "SUNNY IN LISBON"
    [run] = rec.runs
    again = Workflow.of(agent).run("Weather in Lisbon?", replay=run, store=False)
    assert again.replay_diverged_at is None and again.output == "SUNNY IN LISBON"
    assert [t.request_key for t in again.turns] == [t.request_key for t in run.turns]
    assert model.calls == 2  # no model call
    assert counter.cities == ["Lisbon", "Lisbon"]  # the recorded code ran again (documented)


# -- smolagents' own OpenAI-compatible model, streamed ---------------------------------------


def test_a_streaming_agent_through_the_real_server_model_is_recorded() -> None:
    script = [
        Completion(tool_calls=(("call_1", "get_weather", {"city": "Lisbon"}),)),
        Completion(tool_calls=(("call_2", "final_answer", {"answer": "Sunny."}),)),
        Completion(tool_calls=(("call_2", "final_answer", {"answer": "Sunny."}),)),
    ]
    counter = Counter()
    with ChatCompletionsServer(script) as server:
        model = OpenAIServerModel(
            "qwen2.5:7b", api_base=server.base_url, api_key="sk-test-1",
            flatten_messages_as_text=True,
        )  # fmt: skip
        agent, _ = weather_agent(counter, model=model, stream_outputs=True)
        with record(agent, store=False) as rec:
            assert agent.run("Weather in Lisbon?") == "Sunny."
        assert agent.model is model
        assert all(r.body.get("stream") for r in server.requests)
        [run] = rec.runs
        assert [t.model for t in run.turns] == ["qwen2.5:7b", "qwen2.5:7b"]
        [done] = run.turns[0].tool_calls
        assert (done.id, done.arguments, done.result) == (
            "call_1",
            {"city": "Lisbon"},
            "sunny in Lisbon",
        )
        assert (run.turns[0].input_tokens, run.turns[0].output_tokens) == (10, 5)
        assert len(server.requests) == 2
        # `Workflow.of(agent)` runs smolagents non-streamed. smolagents keeps a streamed reply
        # without text as "" where a non-streamed one is None, so its next request writes the
        # calls after a newline: the replay serves turn 0 and goes live from turn 1.
        again = Workflow.of(agent).run("Weather in Lisbon?", replay=run, store=False)
        assert again.replay_diverged_at == 1 and len(server.requests) == 3
        assert [t.replayed for t in again.turns] == [True, False]
        assert counter.cities == ["Lisbon"] and again.output == "Sunny."
        assert "sk-test-1" not in run.to_json()


def test_an_agent_without_a_name_needs_one() -> None:
    agent, _ = weather_agent(Counter(), name=None)
    with pytest.raises(ValueError, match=r"no name.*record\(agent, name="):
        record(agent)
    with record(agent, name="Helper", store=False) as rec:
        agent.run("Weather in Lisbon?")
    assert rec.runs[0].turns[0].agent == "Helper"
    assert isinstance(agent.memory.steps[-1], ActionStep)  # the memory as smolagents left it
