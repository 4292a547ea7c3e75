"""An OpenAI Agents SDK `Agent` as a thena_nb step: the real SDK on a scripted offline
`agents.Model`, and through its real `OpenAIChatCompletionsModel` against the chat
completions server on 127.0.0.1. One turn per model call; replay, gates, handoffs."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from agents import (
    Agent as SDKAgent,
)
from agents import (
    FunctionTool,
    Model,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    OpenAIChatCompletionsModel,
    RunContextWrapper,
    Usage,
    WebSearchTool,
    function_tool,
)
from agents_sdk_offline import Answer, _no_trace_export, call, text  # noqa: F401 (fixture)
from chat_completions_server import ChatCompletionsServer, Completion

from thena_nb import Decision, Workflow
from thena_nb.core.engine.foreign import ForeignAgent
from thena_nb.frameworks.openai_agents import AgentsSDKStep
from thena_nb.store import MemoryRunStore


class Scripted(Model):
    """An offline model: `answer(instructions, input items)` gives the response's items;
    every call is counted and its input kept."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.calls = 0
        self.seen: list[tuple[str | None, list[dict[str, Any]]]] = []

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
        usage = Usage(requests=1, input_tokens=11, output_tokens=7, total_tokens=18)
        return ModelResponse(
            output=self.answer(system_instructions, items), usage=usage, response_id=None
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the step runs non-streamed")


def _last_output(items: list[dict[str, Any]]) -> str | None:
    last = items[-1]
    return last.get("output") if last.get("type") == "function_call_output" else None


def weather_answer(instructions: str | None, items: list[dict[str, Any]]) -> list[Any]:
    output = _last_output(items)
    if output is None:
        return [call("call_1", "get_weather", {"city": "Lisbon"})]
    return [text(f"Forecast: {output}")]


class Counter:
    def __init__(self) -> None:
        self.tools: list[str] = []


def weather_agent(
    counter: Counter, answer: Answer = weather_answer
) -> tuple[SDKAgent[Any], Scripted]:
    model = Scripted(answer)

    @function_tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        counter.tools.append(city)
        return f"sunny in {city}"

    agent = SDKAgent(name="Forecaster", instructions="Be brief.", model=model, tools=[get_weather])
    return agent, model


def test_workflow_of_names_the_step_after_the_agent_and_refuses_hosted_tools() -> None:
    agent, _ = weather_agent(Counter())
    wf = Workflow.of(agent)
    assert wf.name == "Forecaster"
    assert isinstance(wf.steps[0], AgentsSDKStep) and isinstance(wf.steps[0], ForeignAgent)
    assert wf.steps[0].framework == "OpenAI Agents SDK"
    with pytest.raises(ValueError, match="hosted tools.*WebSearchTool"):
        Workflow.of(SDKAgent(name="Searcher", tools=[WebSearchTool()]))


def test_one_turn_per_model_call_with_the_tools_the_sdk_ran() -> None:
    counter = Counter()
    agent, model = weather_agent(counter)
    run = Workflow.of(agent).run("Weather in Lisbon?", store=False)
    assert run.status == "finished"
    assert run.output == "Forecast: sunny in Lisbon"
    assert model.calls == 2 and counter.tools == ["Lisbon"]
    first, second = run.turns
    assert (first.agent, second.agent) == ("Forecaster", "Forecaster")
    [done] = first.tool_calls
    assert (done.id, done.name, done.arguments, done.ok, done.result) == (
        "call_1",
        "get_weather",
        {"city": "Lisbon"},
        True,
        "sunny in Lisbon",
    )
    assert not second.tool_calls and second.info.response == "Forecast: sunny in Lisbon"
    assert (first.input_tokens, first.output_tokens) == (11, 7)
    sent = run.request_of(1)
    assert sent.system == "Be brief."
    assert [m.role for m in sent.messages] == ["user", "assistant", "tool"]
    assert [t.name for t in sent.tools] == ["get_weather"]
    # what the SDK sent the model: the user's text, the call, its output
    system, items = model.seen[1]
    assert system == "Be brief."
    assert [i.get("type", "message") for i in items] == [
        "message",
        "function_call",
        "function_call_output",
    ]


def test_a_tool_that_raises_is_a_failed_call_with_the_text_the_model_read() -> None:
    def answer(instructions: str | None, items: list[dict[str, Any]]) -> list[Any]:
        output = _last_output(items)
        if output is None:
            return [call("call_x", "explode", {})]
        return [text(f"Sorry: {output}")]

    @function_tool
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("kaboom")

    agent = SDKAgent(name="Boom", model=Scripted(answer), tools=[explode])
    run = Workflow.of(agent).run("go", store=False)
    [failed] = run.turns[0].tool_calls
    assert failed.ok is False
    assert failed.error == "An error occurred while running the tool. Please try again."
    assert failed.traceback and "kaboom" in failed.traceback
    assert run.output == f"Sorry: {failed.error}"
    assert run.turns[0].info.tool_error


def test_a_tool_without_a_failure_function_fails_the_run_and_keeps_its_turn() -> None:
    def answer(instructions: str | None, items: list[dict[str, Any]]) -> list[Any]:
        return [call("call_x", "explode", {})]

    @function_tool(failure_error_function=None)
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("kaboom")

    agent = SDKAgent(name="Boom", model=Scripted(answer), tools=[explode])
    with pytest.raises(Exception, match="kaboom") as caught:
        Workflow.of(agent).run("go", store=False)
    partial = caught.value.run  # type: ignore[attr-defined]
    assert partial.status == "failed"
    [turn] = partial.turns
    assert turn.tool_calls[0].ok is False
    assert "kaboom" in (turn.tool_calls[0].traceback or "")


def test_replay_makes_no_model_call_and_no_tool_call() -> None:
    counter = Counter()
    agent, model = weather_agent(counter)
    wf = Workflow.of(agent)
    run = wf.run("Weather in Lisbon?", store=False)
    before = (model.calls, len(counter.tools))
    again = wf.run("Weather in Lisbon?", replay=run, store=False)
    assert (model.calls, len(counter.tools)) == before
    assert again.replay_diverged_at is None
    assert [t.replayed for t in again.turns] == [True, True]
    assert again.output == run.output
    assert [t.request_key for t in again.turns] == [t.request_key for t in run.turns]
    assert again.turns[0].tool_calls[0].result == "sunny in Lisbon"


def test_a_stored_run_replays() -> None:
    counter = Counter()
    agent, model = weather_agent(counter)
    wf = Workflow.of(agent)
    store = MemoryRunStore()
    run = wf.run("Weather in Lisbon?", store=store)
    again = wf.run("Weather in Lisbon?", replay=run, store=store)
    assert model.calls == 2 and counter.tools == ["Lisbon"]
    assert again.replay_diverged_at is None and again.output == run.output


def test_changed_instructions_are_a_divergence_at_the_first_turn() -> None:
    counter = Counter()
    agent, model = weather_agent(counter)
    run = Workflow.of(agent).run("Weather in Lisbon?", store=False)
    again = Workflow.of(agent.clone(instructions="other")).run(
        "Weather in Lisbon?", replay=run, store=False
    )
    assert again.replay_diverged_at == 0
    assert model.calls == 4
    assert again.request_of(0).system == "other"
    changed = Workflow("Forecaster", [Workflow.of(agent).steps[0].replace(system="Say more.")])
    assert changed.run("Weather?", store=False).request_of(0).system == "Say more."


def test_gates_edit_and_reject() -> None:
    counter = Counter()
    agent, model = weather_agent(counter)
    wf = Workflow.of(agent, gate=["get_weather"])
    edited = wf.run(
        "Weather in Lisbon?", approve=lambda p: Decision.edit({"city": "Porto"}), store=False
    )
    assert counter.tools == ["Porto"]
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
    assert again.replay_diverged_at is None and model.calls == calls
    assert again.output == edited.output and counter.tools == ["Porto"]

    rejected = wf.run("Weather in Lisbon?", approve=lambda p: Decision.reject("no"), store=False)
    assert counter.tools == ["Porto"]  # the tool did not run
    assert rejected.turns[0].tool_calls[0].ok is False
    assert "no" in rejected.output
    _, items = model.seen[-1]
    assert items[-1]["type"] == "function_call_output" and "no" in items[-1]["output"]


def test_deps_are_the_run_context() -> None:
    def answer(instructions: str | None, items: list[dict[str, Any]]) -> list[Any]:
        output = _last_output(items)
        return [call("c1", "sky", {})] if output is None else [text(output)]

    @function_tool
    def sky(ctx: RunContextWrapper[str]) -> str:
        """The sky over the city in the context."""
        return f"clear over {ctx.context}"

    agent = SDKAgent(name="Typed", model=Scripted(answer), tools=[sky])
    run = Workflow.of(agent).run("Sky?", deps="Lisbon", store=False)
    assert run.output == "clear over Lisbon"


def test_a_handoff_runs_inside_the_step_and_each_turn_holds_its_agents_instructions() -> None:
    def triage_answer(instructions: str | None, items: list[dict[str, Any]]) -> list[Any]:
        return [call("h1", "transfer_to_specialist", {})]

    def specialist_answer(instructions: str | None, items: list[dict[str, Any]]) -> list[Any]:
        return [text("Handled.")]

    specialist = SDKAgent(
        name="Specialist", instructions="Be precise.", model=Scripted(specialist_answer)
    )
    triage_model = Scripted(triage_answer)
    triage = SDKAgent(
        name="Triage", instructions="Route.", model=triage_model, handoffs=[specialist]
    )
    wf = Workflow.of(triage)
    run = wf.run("Help", store=False)
    assert run.output == "Handled."
    assert [t.agent for t in run.turns] == ["Triage", "Triage"]
    assert [run.request_of(k).system for k in (0, 1)] == ["Route.", "Be precise."]
    [handed] = run.turns[0].tool_calls
    assert (handed.name, handed.ok, handed.result) == (
        "transfer_to_specialist",
        True,
        '{"assistant": "Specialist"}',
    )
    again = wf.run("Help", replay=run, store=False)
    assert again.replay_diverged_at is None and again.output == "Handled."
    assert triage_model.calls == 1


def test_through_the_real_chat_completions_model_against_the_loopback_server() -> None:
    script = [
        Completion(tool_calls=(("call_1", "get_weather", {"city": "Lisbon"}),)),
        Completion(content="Sunny."),
    ]
    counter = Counter()
    with ChatCompletionsServer(script) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test-1")
        model = OpenAIChatCompletionsModel(model="qwen2.5:7b", openai_client=client)

        @function_tool
        def get_weather(city: str) -> str:
            """Current weather for a city."""
            counter.tools.append(city)
            return f"sunny in {city}"

        agent = SDKAgent(name="Forecaster", instructions="Be brief.", model=model,
                         tools=[get_weather])  # fmt: skip
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
        assert run.turns[0].input_tokens == 10
        body = server.requests[0].body
        assert body["messages"][0] == {"role": "system", "content": "Be brief."}
        sent = len(server.requests)
        again = wf.run("Weather in Lisbon?", replay=run, store=False)
        assert len(server.requests) == sent and again.replay_diverged_at is None
        assert counter.tools == ["Lisbon"]
        assert "sk-test-1" not in run.to_json()


def test_hosted_tools_are_refused_by_name() -> None:
    tool = WebSearchTool()
    with pytest.raises(ValueError, match="'web_search'"):
        AgentsSDKStep(SDKAgent(name="S", tools=[tool]))
    assert isinstance(weather_agent(Counter())[0].tools[0], FunctionTool)


def test_a_gate_without_a_decision_waits_and_resumes() -> None:
    counter = Counter()
    agent, model = weather_agent(counter)
    wf = Workflow.of(agent, gate=True)
    store = MemoryRunStore()
    waiting = wf.run("Weather in Lisbon?", store=store)
    assert waiting.status == "waiting" and counter.tools == []
    [pending] = waiting.pending
    assert (pending.call.id, pending.call.name) == ("call_1", "get_weather")
    done = wf.resume(waiting.run_id, store=store, decisions={pending.call.id: Decision.approve()})
    assert done.status == "finished"
    assert done.output == "Forecast: sunny in Lisbon"
    assert counter.tools == ["Lisbon"]
    assert model.calls == 2  # the waiting turn's reply was kept, not asked again


def test_fork_with_a_tool_result_replays_before_and_goes_live_after() -> None:
    counter = Counter()
    agent, model = weather_agent(counter)
    run = Workflow.of(agent).run("Weather in Lisbon?", store=False)
    rainy = run.fork(0, tool_results={"call_1": "rain"}, store=False)
    assert rainy.output == "Forecast: rain"
    assert counter.tools == ["Lisbon"]  # the forked result was given, the tool not run again
    assert model.calls == 3  # only the turn after the fork went live


def test_two_calls_in_one_turn_and_native_agents_around_the_step() -> None:
    from thena_nb import Agent
    from thena_nb.models import ScriptedModel

    def answer(instructions: str | None, items: list[dict[str, Any]]) -> list[Any]:
        if _last_output(items) is None:
            return [
                call("a", "get_weather", {"city": "Lisbon"}),
                call("b", "get_weather", {"city": "Porto"}),
            ]
        outputs = [i["output"] for i in items if i.get("type") == "function_call_output"]
        return [text(" / ".join(outputs))]

    counter = Counter()
    agent, _ = weather_agent(counter, answer)
    planner = Agent("Planner", model=ScriptedModel(["Check Lisbon and Porto."]))
    checker_model = ScriptedModel(["Looks right."])
    checker = Agent("Checker", model=checker_model)
    run = Workflow("trip", [planner, agent, checker]).run("Plan", store=False)
    assert [t.agent for t in run.turns] == ["Planner", "Forecaster", "Forecaster", "Checker"]
    assert [(c.id, c.result) for c in run.turns[1].tool_calls] == [
        ("a", "sunny in Lisbon"),
        ("b", "sunny in Porto"),
    ]
    assert sorted(counter.tools) == ["Lisbon", "Porto"]
    seen = checker_model.requests[0].messages
    assert any(m.agent == "Forecaster" and "sunny in Porto" in m.content for m in seen)


def test_structured_output() -> None:
    from pydantic import BaseModel

    class Forecast(BaseModel):
        city: str
        sky: str

    def answer(instructions: str | None, items: list[dict[str, Any]]) -> list[Any]:
        return [text('{"city": "Lisbon", "sky": "clear"}')]

    agent = SDKAgent(name="Typed", model=Scripted(answer), output_type=Forecast)
    run = Workflow.of(agent).run("Lisbon?", store=False)
    assert run.output == Forecast(city="Lisbon", sky="clear")


def _pure_answer(instructions: str | None, items: list[dict[str, Any]]) -> list[Any]:
    output = _last_output(items)
    if output is None:
        return [call("call_1", "pure_weather", {"city": "Lisbon"})]
    return [text(f"Forecast: {output}")]


@function_tool
def pure_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


def test_experiments_vary_instructions() -> None:
    agent = SDKAgent(
        name="Forecaster", instructions="Be brief.", model=Scripted(_pure_answer),
        tools=[pure_weather],
    )  # fmt: skip
    store = MemoryRunStore()
    variants = {"brief": {}, "long": {"Forecaster": {"instructions": "Say more."}}}
    exp = Workflow.of(agent).map(["Weather in Lisbon?"], variants=variants, store=store)
    frame = exp.frame()
    assert sorted(frame["variant"]) == ["brief", "long"]
    assert set(frame["status"]) == {"finished"}
    long = next(r for r in exp.runs if r.request_of(0).system == "Say more.")
    assert long.output == "Forecast: sunny in Lisbon"
    again = Workflow.of(agent).map(["Weather in Lisbon?"], variants=variants, store=store)
    assert (exp.reused, again.reused) == (0, 2)  # the same experiment again reuses its runs
    edited = agent.clone(instructions="Changed.")
    assert Workflow.of(edited).map(["Weather in Lisbon?"], store=store).reused == 0


def test_a_session_steps_one_model_call_at_a_time_and_pauses_before_tools() -> None:
    import asyncio

    counter = Counter()
    agent, model = weather_agent(counter)
    wf = Workflow.of(agent)

    async def walk() -> list[Any]:
        s = wf.session("Weather in Lisbon?")
        seen: list[Any] = []
        s.pause_before_tools = True
        first = await s.step()  # the model answered; paused before its tool runs
        seen.append((first, s.paused_at, model.calls, list(counter.tools)))
        s.pause_before_tools = False
        turn = await s.step()  # the tool ran, then the turn was recorded
        seen.append((turn.index if turn else None, model.calls, list(counter.tools)))
        rest = await s.run()
        seen.append((rest.status, len(rest.turns), model.calls))
        return seen

    paused, stepped, ended = asyncio.run(walk())
    assert paused == (None, "tools", 1, [])
    assert stepped == (0, 1, ["Lisbon"])
    assert ended == ("finished", 2, 2)


def test_a_handoff_object_with_a_cycle_back() -> None:
    from agents import handoff

    def back_answer(instructions: str | None, items: list[dict[str, Any]]) -> list[Any]:
        return [text("Done.")]

    def triage_answer(instructions: str | None, items: list[dict[str, Any]]) -> list[Any]:
        return [call("h1", "escalate", {})]

    specialist = SDKAgent(name="Specialist", instructions="Fix it.", model=Scripted(back_answer))
    triage = SDKAgent(
        name="Triage", model=Scripted(triage_answer),
        handoffs=[handoff(specialist, tool_name_override="escalate")],
    )  # fmt: skip
    specialist.handoffs = [triage]  # a cycle: each copy is made once
    run = Workflow.of(triage, gate=True).run(
        "Help", approve=lambda p: Decision.approve(), store=False
    )
    assert run.output == "Done."
    [handed] = run.turns[0].tool_calls
    assert (handed.id, handed.name, handed.ok) == ("h1", "escalate", True)
    assert [t.name for t in run.request_of(1).tools] == ["transfer_to_triage"]


def test_wire_request_of_is_the_sdks_input_items() -> None:
    run = Workflow.of(weather_agent(Counter())[0]).run("Weather in Lisbon?", store=False)
    wire = run.wire_request_of(1)
    assert wire["instructions"] == "Be brief."
    assert [i.get("type", "message") for i in wire["input"]] == [
        "message",
        "function_call",
        "function_call_output",
    ]
    message, called, output = wire["input"]
    assert message == {"role": "user", "content": "Weather in Lisbon?"}
    assert (called["call_id"], called["name"], json.loads(called["arguments"])) == (
        "call_1",
        "get_weather",
        {"city": "Lisbon"},
    )
    assert (output["call_id"], output["output"]) == ("call_1", "sunny in Lisbon")
    assert [t["name"] for t in wire["tools"]] == ["get_weather"]
    json.dumps(wire)  # plain JSON data


def approval_agent(counter: Counter) -> tuple[SDKAgent[Any], Scripted]:
    """An SDK agent whose tool asks for approval the SDK's own way (`needs_approval`)."""

    def answer(instructions: str | None, items: list[dict[str, Any]]) -> list[Any]:
        output = _last_output(items)
        if output is None:
            return [call("c1", "pay", {"amount": 500})]
        return [text(f"Done: {output}")]

    @function_tool(needs_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        counter.tools.append(str(amount))
        return f"paid {amount}"

    model = Scripted(answer)
    return SDKAgent(name="Clerk", model=model, tools=[pay]), model


def test_needs_approval_is_a_thena_nb_gate() -> None:
    counter = Counter()
    agent, model = approval_agent(counter)
    wf = Workflow.of(agent)  # no gate= : the SDK's own asks
    edited = wf.run("pay", approve=lambda p: Decision.edit({"amount": 50}), store=False)
    assert edited.status == "finished"
    assert counter.tools == ["50"]
    assert edited.output == "Done: paid 50"
    done = edited.turns[0].tool_calls[0]
    assert (done.decision, done.arguments, done.original_arguments) == (
        "edit",
        {"amount": 50},
        {"amount": 500},
    )
    assert agent.tools[0].needs_approval is True  # the user's tool is unchanged

    calls = model.calls
    again = wf.run("pay", replay=edited, store=False)
    assert (model.calls, counter.tools) == (calls, ["50"])  # no model call, no tool call
    assert again.replay_diverged_at is None and again.output == "Done: paid 50"

    denied = wf.run("pay", approve=lambda p: Decision.reject("no"), store=False)
    assert counter.tools == ["50"]  # the tool did not run
    assert denied.turns[0].tool_calls[0].ok is False
    assert "no" in denied.output

    store = MemoryRunStore()
    waiting = wf.run("pay", store=store)
    assert waiting.status == "waiting" and counter.tools == ["50"]
    [pending] = waiting.pending
    assert (pending.call.id, pending.call.name) == ("c1", "pay")
    finished = wf.resume(waiting.run_id, store=store, decisions={"c1": Decision.approve()})
    assert finished.status == "finished"
    assert counter.tools == ["50", "500"]
    assert finished.output == "Done: paid 500"


def test_a_needs_approval_policy_holds_every_call_of_its_tool() -> None:
    counter = Counter()

    async def small_only(ctx: Any, params: dict[str, Any], call_id: str) -> bool:
        return bool(params.get("city") != "Lisbon")

    @function_tool(needs_approval=small_only)
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        counter.tools.append(city)
        return f"sunny in {city}"

    agent = SDKAgent(name="Forecaster", model=Scripted(weather_answer), tools=[get_weather])
    asked: list[str] = []

    def approve(p: Any) -> Decision:
        asked.append(p.call.name)
        return Decision.approve()

    run = Workflow.of(agent).run("Weather?", approve=approve, store=False)
    assert asked == ["get_weather"] and counter.tools == ["Lisbon"]
    assert run.output == "Forecast: sunny in Lisbon"
