"""A pydantic-ai `Agent` as a thena_nb step: the real framework on its own offline
`FunctionModel`, and through its real OpenAI client against the chat completions server on
127.0.0.1. One turn per model call; replay, fork, gates, stepping, experiments."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from chat_completions_server import ChatCompletionsServer, Completion
from pydantic import BaseModel
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from thena_nb import Agent, Decision, Run, Workflow, loop, parallel, until_answered
from thena_nb.core.engine.foreign import ForeignAgent
from thena_nb.frameworks.pydantic_ai import PydanticAIStep
from thena_nb.models import ScriptedModel
from thena_nb.store import MemoryRunStore


class Counter:
    def __init__(self) -> None:
        self.model = 0
        self.tools: list[str] = []


def weather_agent(counter: Counter, **kwargs: Any) -> PydanticAgent[Any, Any]:
    """Asks for the weather, then answers with what the tool said."""

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        counter.model += 1
        last = messages[-1].parts[-1]
        if last.part_kind == "user-prompt":
            return ModelResponse(parts=[ToolCallPart("get_weather", {"city": "Lisbon"})])
        if last.part_kind == "tool-return":
            return ModelResponse(parts=[TextPart(f"Forecast: {last.content}")])
        return ModelResponse(parts=[TextPart("?")])

    agent = PydanticAgent(
        FunctionModel(answer), name="Forecaster", instructions="Be brief.", **kwargs
    )

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        counter.tools.append(city)
        return f"sunny in {city}"

    return agent


def test_workflow_of_names_the_step_after_the_agent_and_refuses_other_things() -> None:
    wf = Workflow.of(weather_agent(Counter()))
    assert wf.name == "Forecaster"
    assert isinstance(wf.steps[0], PydanticAIStep)
    assert isinstance(wf.steps[0], ForeignAgent)
    with pytest.raises(TypeError, match="pydantic-ai `Agent`, an OpenAI Agents SDK"):
        Workflow.of(object())
    nameless = PydanticAgent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("x")])))
    with pytest.raises(ValueError, match="no name"):
        Workflow.of(nameless)
    assert Workflow.of(nameless, name="Helper").steps[0].name == "Helper"


def test_one_turn_per_model_call_with_the_tools_the_framework_ran() -> None:
    counter = Counter()
    run = Workflow.of(weather_agent(counter)).run("Weather in Lisbon?", store=False)
    assert run.status == "finished"
    assert run.output == "Forecast: sunny in Lisbon"
    assert counter.model == 2 and counter.tools == ["Lisbon"]
    first, second = run.turns
    assert (first.agent, first.model) == ("Forecaster", "function:answer:")
    [call] = first.tool_calls
    assert (call.name, call.arguments, call.source, call.ok, call.result) == (
        "get_weather",
        {"city": "Lisbon"},
        "native",
        True,
        "sunny in Lisbon",
    )
    assert first.info.called_tool and not second.info.called_tool
    assert second.info.response == "Forecast: sunny in Lisbon"
    assert first.input_tokens > 0 and first.output_tokens > 0
    # what the model was sent, as thena_nb's records: the instructions, the history, the tools
    sent = run.request_of(1)
    assert sent.system == "Be brief."
    assert [m.role for m in sent.messages] == ["user", "assistant", "tool"]
    assert [t.name for t in sent.tools] == ["get_weather"]
    wire = run.wire_request_of(1)
    assert wire["instructions"] == "Be brief."


def test_a_tool_that_asks_for_a_retry_is_a_failed_call_in_the_streak() -> None:
    calls = {"n": 0}

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls["n"] += 1
        if calls["n"] < 3:
            return ModelResponse(parts=[ToolCallPart("flaky", {})])
        return ModelResponse(parts=[TextPart("gave up")])

    agent = PydanticAgent(FunctionModel(answer), name="Flaky", retries=5)

    @agent.tool_plain
    def flaky() -> str:
        raise ModelRetry("the service is down")

    run = Workflow.of(agent).run("go", store=False)
    failed = [c for t in run.turns for c in t.tool_calls]
    assert [c.ok for c in failed] == [False, False]
    assert failed[0].error == "the service is down"
    assert failed[0].traceback and "ModelRetry" in failed[0].traceback
    assert [t.info.tool_error for t in run.turns] == [True, True, None]


def test_replay_makes_no_model_call_and_no_tool_call() -> None:
    counter = Counter()
    wf = Workflow.of(weather_agent(counter))
    run = wf.run("Weather in Lisbon?", store=False)
    before = (counter.model, len(counter.tools))
    again = wf.run("Weather in Lisbon?", replay=run, store=False)
    assert (counter.model, len(counter.tools)) == before
    assert again.replay_diverged_at is None
    assert [t.replayed for t in again.turns] == [True, True]
    assert again.output == run.output
    assert [t.request_key for t in again.turns] == [t.request_key for t in run.turns]


def test_a_changed_instruction_is_a_divergence_where_it_changed() -> None:
    counter = Counter()
    wf = Workflow.of(weather_agent(counter))
    run = wf.run("Weather in Lisbon?", store=False)
    changed = wf.steps[0].replace(instructions="Be thorough.")
    again = Workflow("Forecaster", [changed]).run("Weather in Lisbon?", replay=run, store=False)
    assert again.replay_diverged_at == 0
    assert counter.model == 4
    assert again.request_of(0).system == "Be thorough."


def test_fork_with_a_tool_result_replays_before_and_goes_live_after() -> None:
    counter = Counter()
    wf = Workflow.of(weather_agent(counter))
    run = wf.run("Weather in Lisbon?", store=False)
    call_id = run.turns[0].tool_calls[0].id
    rainy = run.fork(0, tool_results={call_id: "rain"}, store=False)
    assert rainy.output == "Forecast: rain"
    assert counter.tools == ["Lisbon"]  # the forked result was given, the tool not run again
    assert counter.model == 3  # only the turn after the fork went live
    diff = run.diff(rainy)
    assert diff.first_divergence is not None


def test_gates_edit_reject_and_wait_for_a_decision() -> None:
    counter = Counter()
    wf = Workflow.of(weather_agent(counter), gate=["get_weather"])
    edited = wf.run(
        "Weather in Lisbon?", approve=lambda p: Decision.edit({"city": "Porto"}), store=False
    )
    assert counter.tools == ["Porto"]
    call = edited.turns[0].tool_calls[0]
    assert (call.decision, call.arguments, call.original_arguments) == (
        "edit",
        {"city": "Porto"},
        {"city": "Lisbon"},
    )
    assert edited.output == "Forecast: sunny in Porto"

    rejected = wf.run("Weather in Lisbon?", approve=lambda p: Decision.reject("no"), store=False)
    assert counter.tools == ["Porto"]
    assert rejected.turns[0].tool_calls[0].ok is False
    assert "no" in rejected.output

    store = MemoryRunStore()
    waiting = wf.run("Weather in Lisbon?", store=store)
    assert waiting.status == "waiting"
    [pending] = waiting.pending
    assert pending.call.name == "get_weather"
    done = wf.resume(waiting.run_id, store=store, decisions={pending.call.id: Decision.approve()})
    assert done.status == "finished"
    assert done.output == "Forecast: sunny in Lisbon"


def test_a_session_steps_one_model_call_at_a_time_and_pauses_before_tools() -> None:
    counter = Counter()
    wf = Workflow.of(weather_agent(counter))

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


def test_beside_native_agents_the_history_flows_both_ways() -> None:
    counter = Counter()
    planner = Agent("Planner", model=ScriptedModel(["Check Lisbon."]))
    checker_model = ScriptedModel(["Looks right."])
    checker = Agent("Checker", model=checker_model)
    run = Workflow("trip", [planner, weather_agent(counter), checker]).run("Plan", store=False)
    assert [t.agent for t in run.turns] == ["Planner", "Forecaster", "Forecaster", "Checker"]
    seen = checker_model.requests[0].messages
    assert any(m.agent == "Forecaster" and "sunny" in m.content for m in seen)
    assert [s.kind for s in Workflow("p", [parallel([weather_agent(Counter())])]).steps] == [
        "parallel"
    ]
    looped = Workflow(
        "l", [loop(steps=[weather_agent(Counter())], until=until_answered, max_iterations=2)]
    ).run("Weather?", store=False)
    assert looped.loops[0].stop_reason == "until"


class Forecast(BaseModel):
    city: str
    sky: str


def test_structured_output_and_deps() -> None:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1].parts[-1]
        if last.part_kind == "user-prompt":
            return ModelResponse(parts=[ToolCallPart("sky_over", {})])
        [out] = info.output_tools
        return ModelResponse(
            parts=[ToolCallPart(out.name, {"city": "Lisbon", "sky": last.content})]
        )

    agent = PydanticAgent(FunctionModel(answer), name="Typed", output_type=Forecast, deps_type=str)

    @agent.tool
    def sky_over(ctx: RunContext[str]) -> str:
        return ctx.deps

    wf = Workflow.of(agent)
    run = wf.run("Lisbon?", deps="clear", store=False)
    assert run.output == Forecast(city="Lisbon", sky="clear")
    final = run.turns[-1].tool_calls[0]
    assert final.ok is True  # the output tool's call is a call that worked
    store = MemoryRunStore()
    kept = wf.run("Lisbon?", deps="clear", store=store)
    loaded = Run.load(kept.run_id, store=store)
    assert loaded.turns[-1].tool_calls[0].name == final.name


def test_an_exception_in_the_framework_fails_the_run_and_keeps_its_turns() -> None:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart("explode", {})])

    agent = PydanticAgent(FunctionModel(answer), name="Boom")

    @agent.tool_plain
    def explode() -> str:
        raise RuntimeError("kaboom")

    with pytest.raises(RuntimeError, match="kaboom") as caught:
        Workflow.of(agent).run("go", store=False)
    partial = caught.value.run  # type: ignore[attr-defined]
    assert partial.status == "failed"
    [turn] = partial.turns
    assert turn.tool_calls[0].ok is False
    assert "kaboom" in (turn.tool_calls[0].traceback or "")


def _pure_answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1].parts[-1]
    if last.part_kind == "user-prompt":
        return ModelResponse(parts=[ToolCallPart("_pure_weather", {"city": "Lisbon"})])
    return ModelResponse(parts=[TextPart(f"Forecast: {last.content}")])


def _pure_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


def test_experiments_vary_instructions_and_reuse_stored_runs() -> None:
    # The model function and tool hold no state of their own: what a function counts while
    # it runs is part of its fingerprint until state is told from configuration.
    agent = PydanticAgent(FunctionModel(_pure_answer), name="Forecaster", tools=[_pure_weather])
    wf = Workflow.of(agent)
    store = MemoryRunStore()
    variants = {"brief": {}, "long": {"Forecaster": {"instructions": "Say more."}}}
    exp = wf.map(["Weather in Lisbon?"], variants=variants, store=store)
    frame = exp.frame()
    assert sorted(frame["variant"]) == ["brief", "long"]
    assert set(frame["status"]) == {"finished"}
    long = next(r for r in exp.runs if r.request_of(0).system == "Say more.")
    assert long.output == "Forecast: sunny in Lisbon"
    again = Workflow.of(agent).map(["Weather in Lisbon?"], variants=variants, store=store)
    assert (exp.reused, again.reused) == (0, 2)  # the same experiment again reuses its runs
    edited = PydanticAgent(
        FunctionModel(_pure_answer),
        name="Forecaster",
        tools=[_pure_weather],
        retries=1,
        instructions="Changed.",
    )
    assert Workflow.of(edited).map(["Weather in Lisbon?"], store=store).reused == 0


def test_through_the_real_openai_client_against_the_loopback_server() -> None:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    script = [
        Completion(tool_calls=(("call_1", "get_weather", {"city": "Lisbon"}),)),
        Completion(content="Sunny."),
    ]
    with ChatCompletionsServer(script) as server:
        model = OpenAIChatModel(
            "gpt-4o-mini", provider=OpenAIProvider(base_url=server.base_url, api_key="sk-test-1")
        )
        agent = PydanticAgent(model, name="Forecaster", instructions="Be brief.")

        @agent.tool_plain
        def get_weather(city: str) -> str:
            """Current weather for a city."""
            return f"sunny in {city}"

        wf = Workflow.of(agent)
        run = wf.run("Weather in Lisbon?", store=False)
        assert run.output == "Sunny."
        assert [t.model for t in run.turns] == ["gpt-4o-mini", "gpt-4o-mini"]
        assert all(t.cost_usd and t.cost_usd > 0 for t in run.turns)  # priced as OpenAI's
        assert run.turns[0].tool_calls[0].id == "call_1"
        assert run.turns[0].input_tokens == 10
        assert [t.response_id for t in run.turns] == ["chatcmpl-test"] * 2  # the API's own id
        assert run.turns[0].response_model == "gpt-4o-mini"  # as the server said it answered
        sent = len(server.requests)
        again = wf.run("Weather in Lisbon?", replay=run, store=False)
        assert len(server.requests) == sent and again.replay_diverged_at is None
        assert again.cost_usd == 0 and again.usage.saved_usd == pytest.approx(run.cost_usd)
        assert "sk-test-1" not in run.to_json()


def test_a_thena_workflow_cell_takes_a_pydantic_ai_agent_from_the_namespace() -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.reset(new_session=False)
    shell.run_line_magic("load_ext", "thena_nb")
    try:
        shell.user_ns["forecaster"] = weather_agent(Counter())
        shell.run_cell_magic("thena_workflow", "trip", "forecaster\n")
        wf = shell.user_ns["trip"]
        assert isinstance(wf.steps[0], PydanticAIStep)
        assert wf.run("Weather?", store=False).output == "Forecast: sunny in Lisbon"
    finally:
        shell.run_line_magic("unload_ext", "thena_nb")
        shell.reset(new_session=False)


def test_continue_with_replays_the_conversation_and_answers_the_follow_up() -> None:
    counter = Counter()
    run = Workflow.of(weather_agent(counter)).run("Weather in Lisbon?", store=False)
    more = run.continue_with("And tomorrow?", store=False)
    assert [t.replayed for t in more.turns] == [True, True, False, False]
    assert counter.model == 4  # two new model calls: the follow-up's
    assert [m.content for m in more.history if m.role == "user"] == [
        "Weather in Lisbon?",
        "And tomorrow?",
    ]


def test_wire_request_of_is_pydantic_ais_own_messages() -> None:
    run = Workflow.of(weather_agent(Counter())).run("Weather in Lisbon?", store=False)
    wire = run.wire_request_of(1)
    assert wire["instructions"] == "Be brief."
    kinds = [m["kind"] for m in wire["messages"]]
    assert kinds == ["request", "response", "request"]
    parts = [p["part_kind"] for m in wire["messages"] for p in m["parts"]]
    assert parts == ["user-prompt", "tool-call", "tool-return"]


def approval_agent(counter: Counter) -> PydanticAgent[Any, Any]:
    """A pydantic-ai agent whose tool asks for approval the framework's own way."""

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        counter.model += 1
        last = messages[-1].parts[-1]
        if last.part_kind == "user-prompt":
            return ModelResponse(parts=[ToolCallPart("pay", {"amount": 500}, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart(f"Done: {last.content}")])

    agent = PydanticAgent(FunctionModel(answer), name="Clerk")

    @agent.tool_plain(requires_approval=True)
    def pay(amount: int) -> str:
        counter.tools.append(str(amount))
        return f"paid {amount}"

    return agent


def test_requires_approval_is_a_thena_nb_gate() -> None:
    counter = Counter()
    wf = Workflow.of(approval_agent(counter))  # no gate= : the framework's own asks
    edited = wf.run("pay", approve=lambda p: Decision.edit({"amount": 50}), store=False)
    assert counter.tools == ["50"]
    assert edited.output == "Done: paid 50"
    assert edited.turns[0].tool_calls[0].decision == "edit"
    denied = wf.run("pay", approve=lambda p: Decision.reject("too much"), store=False)
    assert counter.tools == ["50"]
    assert "too much" in denied.output
    again = wf.run("pay", replay=edited, store=False)
    assert counter.tools == ["50"] and again.replay_diverged_at is None
    assert again.output == "Done: paid 50"
    store = MemoryRunStore()
    waiting = wf.run("pay", store=store)
    assert waiting.status == "waiting"
    done = wf.resume(
        waiting.run_id, store=store, decisions={"c1": Decision.respond("paid by hand")}
    )
    assert counter.tools == ["50"]
    assert done.output == "Done: paid by hand"


def test_resume_finishes_a_run_cut_short_replaying_what_it_had() -> None:
    counter = Counter()
    wf = Workflow.of(weather_agent(counter))
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


def test_a_breakpoint_pauses_a_running_session_after_a_foreign_turn() -> None:
    counter = Counter()
    wf = Workflow.of(weather_agent(counter))

    async def go() -> tuple[Any, ...]:
        s = wf.session("Weather in Lisbon?")
        s.breakpoints.append(lambda turn: turn.info.called_tool)
        first = await s.run()
        at_break = (s.done, len(first.turns), counter.model)
        last = await s.run()
        return at_break, (s.done, len(last.turns))

    at_break, end = asyncio.run(go())
    assert at_break == (False, 1, 1)
    assert end == (True, 2)


def test_a_release_outside_the_supported_range_says_which(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib import metadata

    from thena_nb import frameworks

    real = metadata.version
    monkeypatch.setattr(
        frameworks.metadata,
        "version",
        lambda dist: "1.0.3" if dist == "pydantic-ai-slim" else real(dist),
    )
    with pytest.raises(ImportError, match=r"supports pydantic-ai-slim from 2\.40.*1\.0\.3"):
        Workflow.of(weather_agent(Counter()))


def test_thena_nb_spans_cover_foreign_turns_and_the_frameworks_own_stay_off() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from thena_nb import telemetry

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.instrument(provider)
    try:
        Workflow.of(weather_agent(Counter())).run("Weather in Lisbon?", store=False)
    finally:
        telemetry.uninstrument()
    names = [s.name for s in exporter.get_finished_spans()]
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    assert len(chats) == 2, names  # one per model call: thena_nb's, not also pydantic-ai's
    assert chats[0].attributes["gen_ai.usage.input_tokens"] > 0
    turns = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent Forecaster"]
    assert len(turns) == 2 and turns[0].attributes["gen_ai.agent.name"] == "Forecaster"
    assert [n for n in names if n.startswith("execute_tool")] == ["execute_tool get_weather"]


def test_an_experiments_runs_of_one_agent_at_once_keep_to_their_own_calls() -> None:
    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        first = messages[0].parts[-1].content
        last = messages[-1].parts[-1]
        await asyncio.sleep(0.01 if "1" in str(first) else 0.02)
        if last.part_kind == "user-prompt":
            return ModelResponse(parts=[ToolCallPart("echo", {"text": str(first)})])
        return ModelResponse(parts=[TextPart(f"said {last.content}")])

    agent = PydanticAgent(FunctionModel(answer), name="Echo")

    @agent.tool_plain
    def echo(text: str) -> str:
        return text

    inputs = [f"case {i}" for i in range(6)]
    exp = Workflow.of(agent).map(inputs, concurrency=6, store=False)
    outputs = {r.input: r.output for r in exp.runs}
    assert outputs == {i: f"said {i}" for i in inputs}


def test_the_models_text_streams_to_listeners_live_and_replayed() -> None:
    from pydantic_ai.models.test import TestModel

    agent = PydanticAgent(TestModel(custom_output_text="Sunny in Lisbon today."), name="Sky")
    wf = Workflow.of(agent)

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
    assert kinds.index("turn_started") < kinds.index("text_delta") < kinds.index("turn_finished")
    again, _, replayed_pieces = asyncio.run(listen(run))
    assert again.replay_diverged_at is None and again.output == run.output
    assert replayed_pieces == []  # a served answer is no model call: nothing streams


def test_the_views_and_scored_repeats_of_a_foreign_run(tmp_path: Any) -> None:
    from thena_nb import Case, scorers

    wf = Workflow.of(
        PydanticAgent(FunctionModel(_pure_answer), name="Forecaster", tools=[_pure_weather])
    )
    run = wf.run("<b>Weather</b> in Lisbon?", store=False)
    assert list(run.frame()["agent"]) == ["Forecaster", "Forecaster"]
    assert run.failure_chart() is not None
    page = run.to_html(tmp_path / "run.html").read_text()
    assert "_pure_weather" in page and "<b>Weather</b>" not in page
    exp = wf.map(
        [Case("Weather in Lisbon?", expected="sunny")],
        scorers=[scorers.contains(), scorers.no_failed_tools()],
        repeats=3,
        store=False,
    )
    frame = exp.frame()
    assert len(frame) == 3 and set(frame["status"]) == {"finished"}
    assert frame.filter(like="contains").iloc[:, 0].eq(1.0).all()
