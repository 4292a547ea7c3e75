"""smolagents agents as thena_nb steps: the real framework on an offline `Model` written
here (it answers from the messages it is given, with `ChatMessage` tool calls), and through
its real `OpenAIServerModel` against the chat completions server on 127.0.0.1. One turn per
model call; replay, fork, diff, gates, stepping, stores, `CodeAgent`, concurrent runs."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from chat_completions_server import ChatCompletionsServer, Completion
from smol_offline import QUIET, Answer, call, observation, said
from smolagents import ChatMessage, CodeAgent, Model, OpenAIServerModel, ToolCallingAgent, tool
from smolagents.models import MessageRole

from thena_nb import Agent, Budget, Decision, Message, Run, Workflow, loop, parallel
from thena_nb.core.engine.foreign import ForeignAgent
from thena_nb.frameworks.smolagents import SmolagentsStep
from thena_nb.models import ScriptedModel
from thena_nb.store import MemoryRunStore, SqliteRunStore


class Offline(Model):
    """An offline smolagents model: `answer(messages)` gives the message; every call is
    counted and the messages it was given are kept."""

    def __init__(self, answer: Answer, model_id: str = "offline") -> None:
        super().__init__(model_id=model_id)
        self.answer = answer
        self.calls = 0
        self.seen: list[list[Any]] = []
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
            self.seen.append(list(messages))
        message = self.answer(list(messages))
        message.token_usage = _usage()
        return message


def _usage() -> Any:
    from smolagents.monitoring import TokenUsage

    return TokenUsage(input_tokens=11, output_tokens=7)


def weather_answer(messages: list[Any]) -> ChatMessage:
    seen = observation(messages)
    if seen is None:
        return call("call_1", "get_weather", city="Lisbon")
    return call("call_2", "final_answer", answer=f"Forecast: {seen}")


class Counter:
    def __init__(self) -> None:
        self.cities: list[str] = []


def weather_agent(
    counter: Counter, answer: Answer = weather_answer, **kwargs: Any
) -> tuple[ToolCallingAgent, Offline]:
    model = Offline(answer)

    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city.

        Args:
            city: The city.
        """
        counter.cities.append(city)
        return f"sunny in {city}"

    kwargs.setdefault("name", "Forecaster")
    agent = ToolCallingAgent(
        tools=[get_weather], model=model, instructions="Be brief.", verbosity_level=QUIET,
        **kwargs,
    )  # fmt: skip
    return agent, model


def test_workflow_of_names_the_step_after_the_agent_or_asks_for_a_name() -> None:
    agent, _ = weather_agent(Counter())
    wf = Workflow.of(agent)
    assert wf.name == "Forecaster"
    step = wf.steps[0]
    assert isinstance(step, SmolagentsStep) and isinstance(step, ForeignAgent)
    assert (step.framework, step.model.name) == ("smolagents", "offline")
    nameless, _ = weather_agent(Counter(), name=None)
    with pytest.raises(ValueError, match=r"no name.*ToolCallingAgent\(\.\.\., name="):
        Workflow.of(nameless)
    assert Workflow.of(nameless, name="Helper").steps[0].name == "Helper"
    with pytest.raises(ValueError, match="no changeable field 'tools'"):
        step.replace(tools=[])


def test_one_turn_per_model_call_with_the_tools_smolagents_ran() -> None:
    counter = Counter()
    agent, model = weather_agent(counter)
    run = Workflow.of(agent).run("Weather in Lisbon?", store=False)
    assert run.status == "finished"
    assert run.output == "Forecast: sunny in Lisbon"
    assert model.calls == 2 and counter.cities == ["Lisbon"]
    first, second = run.turns
    assert (first.agent, first.model) == ("Forecaster", "offline")
    [done] = first.tool_calls
    assert (done.id, done.name, done.arguments, done.source, done.ok, done.result) == (
        "call_1",
        "get_weather",
        {"city": "Lisbon"},
        "native",
        True,
        "sunny in Lisbon",
    )
    [final] = second.tool_calls
    assert (final.name, final.arguments) == ("final_answer", {"answer": run.output})
    assert (first.input_tokens, first.output_tokens) == (11, 7)
    assert run.usage.input_tokens == 22
    # what the model was sent, as thena_nb's records: the system prompt, history and tools
    sent = run.request_of(1)
    assert "Be brief." in sent.system
    assert [m.role for m in sent.messages] == ["user", "assistant", "tool"]
    assert sorted(t.name for t in sent.tools) == ["final_answer", "get_weather"]
    # and as smolagents sent it: the task, the call, the observation
    assert [said(m).split("\n")[0] for m in model.seen[1][1:]] == [
        "New task:",
        "Calling tools:",
        "Observation:",
    ]
    wire = run.wire_request_of(1)
    assert [m["role"] for m in wire["messages"]] == ["system", "user", "tool-call", "tool-response"]
    assert agent.memory.steps == []  # the user's agent was not run: a copy was


def test_replay_makes_no_model_call_and_no_tool_call() -> None:
    counter = Counter()
    agent, model = weather_agent(counter)
    wf = Workflow.of(agent)
    run = wf.run("Weather in Lisbon?", store=False)
    again = wf.run("Weather in Lisbon?", replay=run, store=False)
    assert (model.calls, counter.cities) == (2, ["Lisbon"])
    assert again.replay_diverged_at is None
    assert [t.replayed for t in again.turns] == [True, True]
    assert again.output == run.output
    assert [t.request_key for t in again.turns] == [t.request_key for t in run.turns]


def test_changed_instructions_diverge_at_the_first_turn_and_go_live() -> None:
    counter = Counter()
    agent, model = weather_agent(counter)
    run = Workflow.of(agent).run("Weather in Lisbon?", store=False)
    changed = Workflow.of(agent).steps[0].replace(system="Say more.")
    again = Workflow("Forecaster", [changed]).run("Weather in Lisbon?", replay=run, store=False)
    assert again.replay_diverged_at == 0
    assert model.calls == 4 and "Say more." in again.request_of(0).system
    assert agent.instructions == "Be brief."


def test_fork_with_a_tool_result_a_reply_and_an_injected_message() -> None:
    counter = Counter()
    agent, model = weather_agent(counter)
    run = Workflow.of(agent).run("Weather in Lisbon?", store=False)

    rainy = run.fork(0, tool_results={"call_1": "rain"}, store=False)
    assert rainy.output == "Forecast: rain"
    assert counter.cities == ["Lisbon"]  # the forked result was given, the tool not run again
    assert model.calls == 3  # only the turn after the fork went live
    assert rainy.turns[0].tool_calls[0].decision == "respond"

    from thena_nb.models import reply

    porto = run.fork(0, reply=reply.tool("get_weather", city="Porto"), store=False)
    assert porto.output == "Forecast: sunny in Porto"
    assert counter.cities == ["Lisbon", "Porto"]  # the edited reply's call ran live
    assert porto.turns[0].attempts == 0 and model.calls == 4

    def heed(messages: list[Any]) -> ChatMessage:
        asked = [said(m) for m in messages if m.role == MessageRole.USER]
        if any("in Celsius" in a for a in asked):
            return call("call_9", "final_answer", answer="22 C")
        return weather_answer(messages)

    model.answer = heed
    told = run.fork(1, inject=[Message(role="user", content="Answer in Celsius.")], store=False)
    assert told.output == "22 C"
    assert "New task:\nAnswer in Celsius." in [said(m) for m in model.seen[-1]]
    assert told.request_of(1).messages[-1].content == "Answer in Celsius."
    again = Workflow.of(agent).run("Weather in Lisbon?", replay=told, store=False)
    assert again.replay_diverged_at is None and again.output == "22 C"


def test_diff_finds_where_two_runs_part() -> None:
    counter = Counter()
    agent, _ = weather_agent(counter)
    run = Workflow.of(agent).run("Weather in Lisbon?", store=False)
    assert (
        run.diff(Workflow.of(agent).run("Weather in Lisbon?", store=False)).first_divergence is None
    )
    rainy = run.fork(0, tool_results={"call_1": "rain"}, store=False)
    found = run.diff(rainy).first_divergence
    assert found is not None and found.cause == "tool_result" and found.turn_a == 0


def test_gates_approve_edit_reject_and_respond_count_the_tools_real_calls() -> None:
    counter = Counter()
    agent, model = weather_agent(counter)
    wf = Workflow.of(agent, gate=["get_weather"])

    approved = wf.run("Weather in Lisbon?", approve=lambda p: Decision.approve(), store=False)
    assert counter.cities == ["Lisbon"] and approved.output == "Forecast: sunny in Lisbon"
    assert approved.turns[1].tool_calls[0].decision is None  # final_answer is not gated

    edited = wf.run(
        "Weather in Lisbon?", approve=lambda p: Decision.edit({"city": "Porto"}), store=False
    )
    assert counter.cities == ["Lisbon", "Porto"]
    done = edited.turns[0].tool_calls[0]
    assert (done.decision, done.arguments, done.original_arguments, done.result) == (
        "edit",
        {"city": "Porto"},
        {"city": "Lisbon"},
        "sunny in Porto",
    )
    assert edited.output == "Forecast: sunny in Porto"
    calls = model.calls
    again = wf.run("Weather in Lisbon?", replay=edited, store=False)
    assert again.replay_diverged_at is None and again.output == edited.output
    assert (model.calls, len(counter.cities)) == (calls, 2)

    rejected = wf.run("Weather in Lisbon?", approve=lambda p: Decision.reject("no"), store=False)
    assert len(counter.cities) == 2  # the tool did not run
    refused = rejected.turns[0].tool_calls[0]
    assert refused.ok is False and refused.decision == "reject"
    assert observation(model.seen[-1]) == refused.error  # the model read the rejection

    answered = wf.run(
        "Weather in Lisbon?", approve=lambda p: Decision.respond("foggy"), store=False
    )
    assert len(counter.cities) == 2
    assert answered.output == "Forecast: foggy"

    store = MemoryRunStore()
    waiting = wf.run("Weather in Lisbon?", store=store)
    assert waiting.status == "waiting" and len(counter.cities) == 2
    [pending] = waiting.pending
    assert (pending.call.id, pending.call.name) == ("call_1", "get_weather")
    resumed = wf.resume(waiting.run_id, store=store, decisions={"call_1": Decision.approve()})
    assert resumed.status == "finished" and resumed.output == "Forecast: sunny in Lisbon"
    assert counter.cities == ["Lisbon", "Porto", "Lisbon"]


def test_a_session_steps_one_model_call_at_a_time_and_pauses_before_tools() -> None:
    counter = Counter()
    agent, model = weather_agent(counter)
    wf = Workflow.of(agent)

    async def walk() -> list[Any]:
        s = wf.session("Weather in Lisbon?")
        seen: list[Any] = []
        s.pause_before_tools = True
        first = await s.step()  # the model answered; paused before its tool runs
        seen.append((first, s.paused_at, model.calls, list(counter.cities)))
        s.pause_before_tools = False
        turn = await s.step()  # the tool ran, then the turn was recorded
        seen.append((turn.index if turn else None, model.calls, list(counter.cities)))
        rest = await s.run()
        seen.append((rest.status, len(rest.turns), model.calls))
        return seen

    paused, stepped, ended = asyncio.run(walk())
    assert paused == (None, "tools", 1, [])
    assert stepped == (0, 1, ["Lisbon"])
    assert ended == ("finished", 2, 2)


def test_a_stopped_session_ends_the_smolagents_thread_and_resumes() -> None:
    counter = Counter()
    agent, model = weather_agent(counter)
    wf = Workflow.of(agent)
    store = MemoryRunStore()

    async def cut() -> Run:
        s = wf.session("Weather in Lisbon?", store=store)
        await s.step()  # turn 0, then paused before the second model call
        s.stop()
        return await s.run()

    before = threading.active_count()
    stopped = asyncio.run(cut())
    assert stopped.status == "stopped" and len(stopped.turns) == 1
    assert threading.active_count() == before  # the step waited for its thread to end
    done = wf.resume(stopped.run_id, store=store)
    assert done.status == "finished" and done.output == "Forecast: sunny in Lisbon"
    assert [t.replayed for t in done.turns] == [True, False]
    assert (model.calls, counter.cities) == (2, ["Lisbon"])


def test_a_budget_stops_the_run_between_model_calls() -> None:
    counter = Counter()
    agent, model = weather_agent(counter)
    run = Workflow("w", [agent], budget=Budget(max_model_calls=1)).run("Weather?", store=False)
    assert run.status == "budget" and len(run.turns) == 1 and model.calls == 1


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_stored_run_loads_and_replays(kind: str, tmp_path: Path) -> None:
    counter = Counter()
    agent, model = weather_agent(counter)
    wf = Workflow.of(agent)

    def check(store: Any) -> None:
        run = wf.run("Weather in Lisbon?", store=store)
        loaded = Run.load(run.run_id, store=store)
        assert loaded.output == run.output
        assert [c.result for t in loaded.turns for c in t.tool_calls] == [
            "sunny in Lisbon",
            "Forecast: sunny in Lisbon",
        ]
        assert loaded.turns[0].request_key == run.turns[0].request_key
        again = wf.run("Weather in Lisbon?", replay=loaded, store=store)
        assert again.replay_diverged_at is None and again.output == run.output
        assert (model.calls, counter.cities) == (2, ["Lisbon"])

    if kind == "memory":
        check(MemoryRunStore())
    else:
        with SqliteRunStore.from_path(tmp_path / "runs.db") as store:
            check(store)


def test_a_tool_that_raises_is_a_failed_call_with_what_the_model_read() -> None:
    def answer(messages: list[Any]) -> ChatMessage:
        seen = observation(messages)
        if seen is None:
            return call("call_x", "explode", reason="test")
        return call("call_y", "final_answer", answer=f"Sorry: {seen}")

    @tool
    def explode(reason: str) -> str:
        """Always fails.

        Args:
            reason: Why.
        """
        raise RuntimeError("kaboom")

    model = Offline(answer)
    agent = ToolCallingAgent(tools=[explode], model=model, name="Boom", verbosity_level=QUIET)
    run = Workflow.of(agent).run("go", store=False)
    [failed] = run.turns[0].tool_calls
    assert failed.ok is False and run.turns[0].info.tool_error
    assert failed.error is not None
    assert failed.error.startswith("Error executing tool 'explode' with arguments")
    assert "RuntimeError: kaboom" in failed.error
    assert failed.traceback and "kaboom" in failed.traceback
    assert run.output == f"Sorry: {failed.error}"  # exactly what smolagents told the model
    again = Workflow.of(agent).run("go", replay=run, store=False)
    assert again.replay_diverged_at is None and model.calls == 2


def test_a_call_written_as_text_is_a_rescued_call() -> None:
    def answer(messages: list[Any]) -> ChatMessage:
        seen = observation(messages)
        if seen is None:
            text = '{"name": "get_weather", "arguments": {"city": "Lisbon"}}'
            return ChatMessage(role=MessageRole.ASSISTANT, content=text)
        return call("call_2", "final_answer", answer=seen)

    counter = Counter()
    agent, model = weather_agent(counter, answer)
    wf = Workflow.of(agent)
    run = wf.run("Weather?", store=False)
    [rescued] = run.turns[0].tool_calls
    assert (rescued.source, rescued.name, rescued.result) == (
        "rescued",
        "get_weather",
        "sunny in Lisbon",
    )
    assert run.turns[0].info.tool_call_source == "rescued"
    again = wf.run("Weather?", replay=run, store=False)
    assert again.replay_diverged_at is None and model.calls == 2 and counter.cities == ["Lisbon"]


def code_agent(counter: Counter) -> tuple[CodeAgent, Offline]:
    def answer(messages: list[Any]) -> ChatMessage:
        seen = observation(messages)
        if seen is None:
            code = "w = get_weather(city='Lisbon')\nprint(w)"
        elif "no code" in seen:
            code = "final_answer('refused')"
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
    agent = CodeAgent(tools=[get_weather], model=model, name="Coder", verbosity_level=QUIET)
    return agent, model


def test_a_code_agent_records_its_code_as_the_call_and_replays_without_the_model() -> None:
    counter = Counter()
    agent, model = code_agent(counter)
    wf = Workflow.of(agent)
    run = wf.run("Weather in Lisbon?", store=False)
    assert run.status == "finished" and run.output == "SUNNY IN LISBON"
    assert model.calls == 2 and counter.cities == ["Lisbon"]
    first, second = run.turns
    [ran] = first.tool_calls
    assert (ran.id, ran.name) == ("call_1", "python_interpreter")
    assert ran.arguments == {"code": "w = get_weather(city='Lisbon')\nprint(w)"}
    assert ran.ok and ran.result == (
        "Execution logs:\nsunny in Lisbon\nLast output from code snippet:\nNone"
    )
    assert second.tool_calls[0].arguments == {"code": "final_answer(w.upper())"}
    assert first.info.response.startswith("Thought: next.")
    assert [t.name for t in run.request_of(0).tools] == ["python_interpreter"]

    again = wf.run("Weather in Lisbon?", replay=run, store=False)
    assert again.replay_diverged_at is None and again.output == "SUNNY IN LISBON"
    assert model.calls == 2  # no model call
    assert counter.cities == ["Lisbon", "Lisbon"]  # the recorded code ran again (documented)


def test_a_code_agent_gate_rejects_or_edits_the_code() -> None:
    counter = Counter()
    agent, _ = code_agent(counter)
    wf = Workflow.of(agent, gate=["python_interpreter"])

    def edit_first(p: Any) -> Decision:
        code = p.call.arguments["code"]
        if "Lisbon" in code:
            return Decision.edit({"code": code.replace("Lisbon", "Porto")})
        return Decision.approve()

    run = wf.run("Weather?", approve=edit_first, store=False)
    assert run.output == "SUNNY IN PORTO" and counter.cities == ["Porto"]

    def reject_first(p: Any) -> Decision:
        return (
            Decision.reject("no code")
            if "Lisbon" in p.call.arguments["code"]
            else Decision.approve()
        )

    refused = wf.run("Weather?", approve=reject_first, store=False)
    assert counter.cities == ["Porto"]  # the rejected code did not run
    assert refused.turns[0].tool_calls[0].ok is False and refused.output == "refused"


def test_three_concurrent_runs_of_one_agent_keep_to_their_own_calls() -> None:
    def answer(messages: list[Any]) -> ChatMessage:
        task = said(messages[1]).removeprefix("New task:\n")
        seen = observation(messages)
        if seen is None:
            return call("c1", "echo", text=task)
        return call("c2", "final_answer", answer=f"said {seen}")

    @tool
    def echo(text: str) -> str:
        """Says the text back.

        Args:
            text: What to say.
        """
        import time

        time.sleep(0.05 if text.endswith("1") else 0.01)
        return text

    model = Offline(answer)
    agent = ToolCallingAgent(tools=[echo], model=model, name="Echo", verbosity_level=QUIET)
    inputs = [f"case {i}" for i in range(3)]
    exp = Workflow.of(agent).map(inputs, concurrency=3, store=False)
    assert {r.input: r.output for r in exp.runs} == {i: f"said {i}" for i in inputs}
    assert all(len(r.turns) == 2 for r in exp.runs) and model.calls == 6


def test_beside_native_agents_the_history_flows_both_ways() -> None:
    counter = Counter()
    agent, model = weather_agent(counter)
    planner = Agent("Planner", model=ScriptedModel(["Check Lisbon."]))
    checker_model = ScriptedModel(["Looks right."])
    checker = Agent("Checker", model=checker_model)
    run = Workflow("trip", [planner, agent, checker]).run("Plan", store=False)
    assert [t.agent for t in run.turns] == ["Planner", "Forecaster", "Forecaster", "Checker"]
    assert said(model.seen[0][1]) == "New task:\nPlan\n\n[Planner] Check Lisbon."
    seen = checker_model.requests[0].messages
    assert any(m.agent == "Forecaster" and "sunny in Lisbon" in m.content for m in seen)
    assert Workflow("p", [parallel([weather_agent(Counter())[0]])]).steps[0].kind == "parallel"
    looped = Workflow("l", [loop(steps=[weather_agent(Counter())[0]], until=lambda ctx: True)]).run(
        "Weather?", store=False
    )
    assert looped.loops[0].stop_reason == "until" and looped.output == "Forecast: sunny in Lisbon"


def test_to_html_escapes_the_models_text(tmp_path: Path) -> None:
    def answer(messages: list[Any]) -> ChatMessage:
        return call("c1", "final_answer", answer="<script>alert(1)</script>")

    agent = ToolCallingAgent(tools=[], model=Offline(answer), name="Sly", verbosity_level=QUIET)
    run = Workflow.of(agent).run("<b>hi</b>", store=False)
    page = run.to_html(tmp_path / "run.html").read_text()
    assert "<script>alert(1)</script>" not in page and "<b>hi</b>" not in page
    assert "&lt;script&gt;" in page


def test_through_the_real_openai_server_model_against_the_loopback_server() -> None:
    script = [
        Completion(tool_calls=(("call_1", "get_weather", {"city": "Lisbon"}),)),
        Completion(tool_calls=(("call_2", "final_answer", {"answer": "Sunny."}),)),
    ]
    counter = Counter()
    with ChatCompletionsServer(script) as server:
        # The loopback server, like many OpenAI-compatible servers, takes text content only:
        # smolagents' own switch for those sends each message's parts as one string.
        model = OpenAIServerModel(
            "qwen2.5:7b", api_base=server.base_url, api_key="sk-test-1",
            flatten_messages_as_text=True,
        )  # fmt: skip

        @tool
        def get_weather(city: str) -> str:
            """Current weather for a city.

            Args:
                city: The city.
            """
            counter.cities.append(city)
            return f"sunny in {city}"

        agent = ToolCallingAgent(tools=[get_weather], model=model, name="Forecaster",
                                 verbosity_level=QUIET)  # fmt: skip
        wf = Workflow.of(agent)
        run = wf.run("Weather in Lisbon?", store=False)
        assert run.output == "Sunny."
        assert [t.model for t in run.turns] == ["qwen2.5:7b", "qwen2.5:7b"]
        [done] = run.turns[0].tool_calls
        assert (done.id, done.arguments, done.result) == (
            "call_1",
            {"city": "Lisbon"},
            "sunny in Lisbon",
        )
        assert (run.turns[0].input_tokens, run.turns[0].output_tokens) == (10, 5)
        body = server.requests[1].body
        assert body["model"] == "qwen2.5:7b"
        assert body["messages"][0]["role"] == "system"
        assert "sunny in Lisbon" in str(body["messages"][-1]["content"])
        assert sorted(t["function"]["name"] for t in body["tools"]) == [
            "final_answer",
            "get_weather",
        ]
        sent = len(server.requests)
        again = wf.run("Weather in Lisbon?", replay=run, store=False)
        assert len(server.requests) == sent and again.replay_diverged_at is None
        assert counter.cities == ["Lisbon"]
        for shown in (run.to_json(), repr(wf.steps[0]), run._repr_html_()):
            assert "sk-test-1" not in shown


def test_a_model_error_fails_the_run_as_itself_and_keeps_finished_turns() -> None:
    class Down(Exception):
        pass

    def answer(messages: list[Any]) -> ChatMessage:
        if observation(messages) is None:
            return call("call_1", "get_weather", city="Lisbon")
        raise Down("the model is down")

    agent, _ = weather_agent(Counter(), answer)
    with pytest.raises(Down, match="the model is down") as caught:
        Workflow.of(agent).run("Weather?", store=False)
    partial = caught.value.run  # type: ignore[attr-defined]
    assert partial.status == "failed" and len(partial.turns) == 1
    assert partial.turns[0].tool_calls[0].result == "sunny in Lisbon"
