"""Spans of runs, read back from the SDK's in-memory exporter: names, kinds, parents,
attributes, and content only when asked for."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from helpers import add, add_call, calc, fail_call
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes
from opentelemetry.semconv.attributes import error_attributes, server_attributes
from opentelemetry.trace import SpanKind, StatusCode

from thena_nb import Agent, Workflow, loop, parallel, telemetry, until_answered
from thena_nb.core.engine import _observe
from thena_nb.models import ModelError, RetryPolicy, ScriptedModel, TransientModelError, reply

FAST = RetryPolicy(max_retries=3, initial_delay=0.0, max_delay=0.0, jitter=False)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.instrument(provider)
    yield exporter
    telemetry.uninstrument()


@pytest.fixture
def content_spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.instrument(provider, capture_content=True)
    yield exporter
    telemetry.uninstrument()


def named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


def one(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    found = [s for s in exporter.get_finished_spans() if s.name == name]
    assert len(found) == 1, [s.name for s in exporter.get_finished_spans()]
    return found[0]


def parent_of(exporter: InMemorySpanExporter, span: ReadableSpan) -> ReadableSpan | None:
    if span.parent is None:
        return None
    by_id = {s.context.span_id: s for s in exporter.get_finished_spans()}
    return by_id[span.parent.span_id]


def tool_loop() -> Workflow:
    agent = calc([add_call(1, 2), add_call(3, 4), "done"])
    return Workflow("sums", [loop(steps=[agent], until=until_answered, max_iterations=5)])


def test_nothing_is_observed_until_instrumented_and_after_uninstrumented() -> None:
    assert _observe.observer is None
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.instrument(provider)
    assert telemetry.instrumented()
    telemetry.uninstrument()
    tool_loop().run("go", store=False)
    assert _observe.observer is None and not telemetry.instrumented()
    assert exporter.get_finished_spans() == ()


def test_a_run_is_a_tree_of_workflow_loop_agent_chat_and_tool_spans(spans) -> None:
    run = tool_loop().run("go", store=False)
    workflow = one(spans, "invoke_workflow sums")
    loop_span = one(spans, "thena.loop sums/0.loop")
    turns = named(spans, "invoke_agent ")
    chats = named(spans, "chat ")
    tools = named(spans, "execute_tool ")
    assert (len(turns), len(chats), len(tools)) == (3, 3, 2)
    assert parent_of(spans, workflow) is None
    assert parent_of(spans, loop_span) is workflow
    assert all(parent_of(spans, t) is loop_span for t in turns)
    # each turn's model call and tool call hang under that very turn
    for turn in turns[:2]:
        kids = [s for s in chats + tools if s.parent and s.parent.span_id == turn.context.span_id]
        assert sorted(k.name for k in kids) == ["chat scripted", "execute_tool add"]
    assert {s.kind for s in [workflow, loop_span, *turns, *tools]} == {SpanKind.INTERNAL}
    assert {s.kind for s in chats} == {SpanKind.CLIENT}
    assert workflow.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert workflow.attributes["gen_ai.workflow.name"] == "sums"
    assert workflow.attributes["gen_ai.conversation.id"] == run.run_id
    assert workflow.attributes["thena.run.status"] == "finished"


def test_turn_chat_and_tool_spans_carry_the_convention_attributes(spans) -> None:
    agent = Agent(
        "Calc",
        model=ScriptedModel([reply.tool("add", a=1, b=2, input_tokens=7, output_tokens=3), "ok"]),
        tools=[add],
        max_tokens=77,
    )
    run = Workflow("w", [loop(steps=[agent], until=until_answered)]).run("go", store=False)
    turn = named(spans, "invoke_agent Calc")[0]
    assert turn.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert turn.attributes["gen_ai.agent.name"] == "Calc"
    assert turn.attributes["gen_ai.provider.name"] == "thena_nb"
    assert turn.attributes["gen_ai.request.model"] == "scripted"
    assert turn.attributes["gen_ai.conversation.id"] == run.run_id
    assert turn.attributes["thena.turn.replayed"] is False
    assert turn.attributes["gen_ai.usage.input_tokens"] == 7
    assert turn.attributes["gen_ai.usage.output_tokens"] == 3
    chat = named(spans, "chat ")[0]
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.max_tokens"] == 77
    # an offline model says no answering model (nor an id): the request's model is all there is
    assert "gen_ai.response.model" not in chat.attributes
    assert "gen_ai.response.id" not in chat.attributes
    assert chat.attributes["gen_ai.request.model"] == "scripted"
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert chat.attributes["gen_ai.usage.cache_read.input_tokens"] == 0
    assert chat.attributes["gen_ai.usage.cache_creation.input_tokens"] == 0
    assert "server.address" not in chat.attributes  # an offline model talks to no server
    tool_span = one(spans, "execute_tool add")
    assert tool_span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool_span.attributes["gen_ai.tool.name"] == "add"
    assert tool_span.attributes["gen_ai.tool.call.id"] == run.turns[0].tool_calls[0].id
    assert tool_span.attributes["thena.tool_call.source"] == "native"
    assert "thena.tool_call.decision" not in tool_span.attributes  # no gate held it
    assert tool_span.status.status_code is StatusCode.UNSET


def test_content_is_absent_by_default(spans) -> None:
    agent = calc([add_call(1, 2), "done"], system="You add.")
    Workflow("w", [loop(steps=[agent], until=until_answered)]).run("secret input", store=False)
    content = {
        "gen_ai.system_instructions",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }
    for span in spans.get_finished_spans():
        assert not content & set(span.attributes), span.name
        assert "secret input" not in json.dumps(dict(span.attributes))


def test_content_is_recorded_with_capture_content(content_spans) -> None:
    agent = calc([add_call(1, 2), "done"], system="You add.")
    Workflow("w", [loop(steps=[agent], until=until_answered)]).run("what is 1+2", store=False)
    first, second = named(content_spans, "chat ")
    assert json.loads(first.attributes["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "You add."}
    ]
    assert json.loads(first.attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "what is 1+2"}]}
    ]
    out = json.loads(first.attributes["gen_ai.output.messages"])
    assert out[0]["role"] == "assistant" and out[0]["finish_reason"] == "tool_call"
    assert out[0]["parts"][0]["type"] == "tool_call"
    assert out[0]["parts"][0]["arguments"] == {"a": 1, "b": 2}
    sent = json.loads(second.attributes["gen_ai.input.messages"])
    assert sent[-1]["role"] == "tool"
    assert sent[-1]["parts"][0] == {
        "type": "tool_call_response",
        "id": out[0]["parts"][0]["id"],
        "response": "3",
    }
    tool_span = one(content_spans, "execute_tool add")
    assert json.loads(tool_span.attributes["gen_ai.tool.call.arguments"]) == {"a": 1, "b": 2}
    assert tool_span.attributes["gen_ai.tool.call.result"] == "3"


def test_every_retry_is_a_chat_span_of_the_same_turn(spans) -> None:
    model = ScriptedModel(
        [
            reply.error(TransientModelError("overloaded", status_code=529)),
            reply.error(TransientModelError("timed out")),
            "fine",
        ]
    )
    Workflow("w", [Agent("A", model=model)], retry=FAST).run("go", store=False)
    turn = one(spans, "invoke_agent A")
    chats = named(spans, "chat ")
    assert len(chats) == 3
    assert all(parent_of(spans, c) is turn for c in chats)
    assert [c.attributes["thena.turn.attempt"] for c in chats] == [1, 2, 3]
    assert chats[0].attributes["error.type"] == "529"
    assert chats[1].attributes["error.type"] == "thena_nb.core.records.errors.TransientModelError"
    assert [c.status.status_code for c in chats] == [
        StatusCode.ERROR,
        StatusCode.ERROR,
        StatusCode.UNSET,
    ]
    assert "error.type" not in chats[2].attributes
    assert turn.attributes["thena.turn.attempts"] == 3


def test_a_model_that_fails_fails_its_turn_and_its_workflow(spans) -> None:
    model = ScriptedModel([reply.error(ModelError("bad request", status_code=400))])
    with pytest.raises(ModelError):
        Workflow("w", [Agent("A", model=model)]).run("go", store=False)
    assert one(spans, "chat scripted").attributes["error.type"] == "400"
    assert one(spans, "invoke_agent A").attributes["error.type"] == "400"
    workflow = one(spans, "invoke_workflow w")
    assert workflow.attributes["error.type"] == "400"
    assert workflow.attributes["thena.run.status"] == "failed"
    assert workflow.status.status_code is StatusCode.ERROR


def test_a_failing_tool_sets_error_type_on_its_span(spans) -> None:
    agent = calc([fail_call(), "gave up"])
    Workflow("w", [loop(steps=[agent], until=until_answered)]).run("go", store=False)
    tool_span = one(spans, "execute_tool fail")
    assert tool_span.attributes["error.type"]
    assert tool_span.status.status_code is StatusCode.ERROR
    assert named(spans, "invoke_agent ")[0].attributes["thena.turn.tool_error"] is True


def test_loop_spans_carry_stop_reason_and_counters(spans) -> None:
    agent = calc([fail_call(), fail_call(), "never"])
    wf = Workflow("w", [loop(steps=[agent], until=until_answered, max_iterations=4, max_fails=2)])
    wf.run("go", store=False)
    span = one(spans, "thena.loop w/0.loop")
    assert span.attributes["thena.step.path"] == "w/0.loop"
    assert span.attributes["thena.loop.stop_reason"] == "fails"
    assert span.attributes["thena.loop.iterations"] == 2
    assert span.attributes["thena.loop.max_iterations"] == 4
    assert span.attributes["thena.loop.max_fails"] == 2
    assert span.attributes["thena.loop.failures.total"] == 2


def test_a_replayed_turn_makes_no_chat_and_no_tool_span(spans) -> None:
    wf = tool_loop()
    first = wf.run("go", store=False)
    spans.clear()
    again = wf.run("go", replay=first, store=False)
    assert all(t.replayed for t in again.turns)
    turns = named(spans, "invoke_agent ")
    assert len(turns) == 3
    assert all(t.attributes["thena.turn.replayed"] is True for t in turns)
    assert named(spans, "chat ") == [] and named(spans, "execute_tool ") == []


def test_parallel_branches_keep_their_own_parents(spans) -> None:
    a = calc([add_call(1, 1), "a"], name="A")
    b = calc([add_call(2, 2), "b"], name="B")
    inner = [loop(steps=[x], until=until_answered) for x in (a, b)]
    Workflow("w", [parallel(inner)]).run("go", store=False)
    workflow = one(spans, "invoke_workflow w")
    loops = named(spans, "thena.loop ")
    assert len(loops) == 2 and all(parent_of(spans, s) is workflow for s in loops)
    for name in ("A", "B"):
        turns = named(spans, f"invoke_agent {name}")
        assert len(turns) == 2
        home = {parent_of(spans, t).name for t in turns}  # type: ignore[union-attr]
        assert len(home) == 1 and home <= {s.name for s in loops}
    for span in named(spans, "chat ") + named(spans, "execute_tool "):
        turn = parent_of(spans, span)
        assert turn is not None and turn.name.startswith("invoke_agent ")
    total = sum(1 for s in named(spans, "execute_tool "))
    assert total == 2


def test_rescued_calls_are_marked_rescued(spans) -> None:
    text = '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'
    agent = Agent("R", model=ScriptedModel([text, "5"]), tools=[add], rescue=True)
    Workflow("w", [loop(steps=[agent], until=until_answered)]).run("go", store=False)
    assert one(spans, "execute_tool add").attributes["thena.tool_call.source"] == "rescued"


def test_every_convention_name_is_one_of_the_pinned_registry(content_spans) -> None:
    agent = calc([add_call(1, 2), fail_call(), "done"], system="s")
    Workflow("w", [loop(steps=[agent], until=until_answered)]).run("go", store=False)
    known = {
        value
        for module in (gen_ai_attributes, server_attributes, error_attributes)
        for key, value in vars(module).items()
        if key.isupper() and isinstance(value, str)
    }
    emitted = {k for s in content_spans.get_finished_spans() for k in s.attributes}
    ours = {k for k in emitted if not k.startswith("thena.")}
    assert ours and ours <= known, ours - known
    assert telemetry.SEMCONV_VERSION == "1.41.0"
    scopes = {s.instrumentation_scope for s in content_spans.get_finished_spans()}
    assert {(sc.name, sc.schema_url) for sc in scopes} == {("thena_nb", telemetry.SCHEMA_URL)}


def test_instrument_refuses_what_is_not_a_tracer_provider() -> None:
    with pytest.raises(TypeError, match="TracerProvider"):
        telemetry.instrument("http://localhost:4318")  # type: ignore[arg-type]
    assert _observe.observer is None


def test_concurrent_runs_make_separate_traces(spans) -> None:
    async def both() -> None:
        one_wf = Workflow("one", [loop(steps=[calc([add_call(), "a"])], until=until_answered)])
        two_wf = Workflow("two", [loop(steps=[calc([add_call(), "b"])], until=until_answered)])
        await asyncio.gather(one_wf.arun("go", store=False), two_wf.arun("go", store=False))

    asyncio.run(both())
    roots = {s.name: s.context.trace_id for s in named(spans, "invoke_workflow ")}
    assert len(set(roots.values())) == 2
    for span in spans.get_finished_spans():
        if span.name.startswith("thena.loop "):
            workflow = span.name.split()[1].split("/")[0]
            assert span.context.trace_id == roots[f"invoke_workflow {workflow}"]
    assert len(named(spans, "execute_tool ")) == 2
