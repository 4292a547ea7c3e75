"""Traces into runs: spans made by the real instrumentations (thena_nb's own, pydantic-ai's)
through the real OpenTelemetry SDK, read back as runs, as OTLP JSON written by the SDK's own
encoder, stored, shown and replayed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format  # type: ignore[import-untyped]
from helpers import add_call, calc, fail_call
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from thena_nb import Agent, Run, Workflow, loop, telemetry, until_answered
from thena_nb.models import ScriptedModel
from thena_nb.store import SqliteRunStore, records_of
from thena_nb.telemetry import load_otlp, runs_from_spans

# -- real spans ----------------------------------------------------------------------------


@pytest.fixture
def exporter() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    exp = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exp))
    yield exp, provider
    telemetry.uninstrument()
    provider.shutdown()


def sums(input: str = "go") -> tuple[Workflow, str]:
    calc_agent = calc([add_call(1, 2), fail_call(), "done"], system="You add.")
    critic = Agent("Critic", model=ScriptedModel(["fine <b>&</b>"]))
    return Workflow("sums", [loop(steps=[calc_agent], until=until_answered), critic]), input


def thena_run(provider: TracerProvider, *, content: bool = True) -> Run:
    telemetry.instrument(provider, capture_content=content)
    try:
        wf, text = sums()
        return wf.run(text, store=False)
    finally:
        telemetry.uninstrument()


def pydantic_agent(
    provider: TracerProvider | None, answers: list[str] | None = None, *, content: bool = True
) -> PydanticAgent[None, str]:
    said = answers or ["3 it is"]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("add", {"a": 1, "b": 2})])
        return ModelResponse(parts=[TextPart(said.pop(0))])

    capabilities = []
    if provider is not None:
        settings = InstrumentationSettings(tracer_provider=provider, include_content=content)
        capabilities.append(Instrumentation(settings=settings))
    agent = PydanticAgent(
        FunctionModel(respond), name="Calc", instructions="You add.", capabilities=capabilities
    )

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return agent


def comparable(run: Run) -> list[dict[str, Any]]:
    """The turns as the trace can tell them: no timing, keys, request records, prices or
    tracebacks (which spans do not carry)."""
    out = []
    for t in run.turns:
        d = t.model_dump(
            exclude={"started_at", "duration_s", "request_key", "request", "cost_usd", "saved_usd"}
        )
        for c in d["tool_calls"]:
            c["traceback"] = None
        out.append(d)
    return out


def otlp_json(spans: tuple[ReadableSpan, ...] | list[ReadableSpan]) -> str:
    """The spans as the SDK's OTLP exporter encodes them, written as JSON by protobuf."""
    return json_format.MessageToJson(encode_spans(spans))


# -- thena_nb's own spans ------------------------------------------------------------------


def test_thena_spans_round_trip_to_an_equal_run(exporter: Any) -> None:
    exp, provider = exporter
    run = thena_run(provider)
    [back] = runs_from_spans(exp.get_finished_spans())
    assert back.run_id == run.run_id and back.workflow_name == "sums"
    assert back.input == "go" and back.output == run.output == "fine <b>&</b>"
    assert comparable(back) == comparable(run)
    assert back.history == run.history
    assert back.usage.model_calls == run.usage.model_calls == 4
    assert back.usage.tool_calls == 2 and back.status == "finished"
    assert back.stop_reasons == run.stop_reasons == {"sums/0.loop": "until"}
    # the live run and its trace agree turn by turn (keys of two kinds are not compared)
    assert run.diff(back).first_divergence is None
    assert all(not p.differs for p in run.diff(back).pairs)
    assert back.loops[0].iterations == 3 and back.loops[0].max_iterations == 10
    failed = back.turns[1].tool_calls[0]
    assert failed.ok is False and failed.error is not None and "boom" in failed.error


def test_a_thena_run_replays_from_its_trace_and_goes_live_where_it_differs(exporter: Any) -> None:
    exp, provider = exporter
    thena_run(provider)
    [imported] = runs_from_spans(exp.get_finished_spans())
    wf, text = sums()
    again = wf.run(text, replay=imported, store=False)
    assert [t.replayed for t in again.turns] == [True] * 4
    assert again.replay_diverged_at is None and again.output == "fine <b>&</b>"
    assert all(not (t.request_key or "").startswith("otel:") for t in again.turns)
    wf, _ = sums()
    other = wf.run("something else", replay=imported, store=False)
    assert other.replay_diverged_at == 0 and not any(t.replayed for t in other.turns)


def test_without_content_the_run_keeps_names_tokens_and_timing_and_refuses_replay(
    exporter: Any,
) -> None:
    exp, provider = exporter
    run = thena_run(provider, content=False)
    [back] = runs_from_spans(exp.get_finished_spans())
    assert back.content_captured is False  # type: ignore[attr-defined]
    assert "content_captured=False" in repr(back)
    assert [t.agent for t in back.turns] == ["Calc", "Calc", "Calc", "Critic"]
    assert [[c.name for c in t.tool_calls] for t in back.turns] == [["add"], ["fail"], [], []]
    assert [c.ok for t in back.turns for c in t.tool_calls] == [True, False]
    assert back.turns[0].duration_s > 0 and back.usage.model_calls == run.usage.model_calls
    frame = back.frame()
    assert frame["content_captured"].tolist() == [False] * 4
    wf, text = sums()
    with pytest.raises(ValueError, match="without message content"):
        wf.run(text, replay=back, store=False)


# -- pydantic-ai's spans -------------------------------------------------------------------


def test_pydantic_ai_spans_become_a_run_with_its_turns_tools_and_tokens(exporter: Any) -> None:
    exp, provider = exporter
    result = pydantic_agent(provider).run_sync("What is 1+2?")
    [run] = runs_from_spans(exp.get_finished_spans())
    assert run.output == result.output == "3 it is" and run.input == "What is 1+2?"
    assert run.workflow_name == "Calc" and run.status == "finished"
    first, second = run.turns
    assert first.info.called_tool and first.tool_calls[0].name == "add"
    assert first.tool_calls[0].arguments == {"a": 1, "b": 2}
    assert first.tool_calls[0].ok is True and first.tool_calls[0].result == "3"
    assert second.info.response == "3 it is" and not second.tool_calls
    usage = result.usage
    assert run.usage.input_tokens == usage.input_tokens
    assert run.usage.output_tokens == usage.output_tokens
    assert first.model == "function:respond:"
    assert [m.role for m in run.history] == ["user", "assistant", "tool", "assistant"]
    assert "source='pydantic-ai'" in repr(run)


def test_a_pydantic_ai_trace_replays_through_workflow_of_without_calling_the_model(
    exporter: Any,
) -> None:
    exp, provider = exporter
    pydantic_agent(provider).run_sync("What is 1+2?")
    [imported] = runs_from_spans(exp.get_finished_spans())
    fresh = pydantic_agent(None, ["a live answer"])
    again = Workflow.of(fresh).run("What is 1+2?", replay=imported, store=False)
    assert again.output == "3 it is" and [t.replayed for t in again.turns] == [True, True]
    assert again.replay_diverged_at is None
    changed = Workflow.of(pydantic_agent(None, ["a live answer"])).run(
        "What is 2+2?", replay=imported, store=False
    )
    assert changed.replay_diverged_at == 0 and changed.output == "a live answer"


def test_a_failed_model_call_makes_a_failed_run(exporter: Any) -> None:
    exp, provider = exporter

    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise RuntimeError("the model is down")

    settings = InstrumentationSettings(tracer_provider=provider)
    agent = PydanticAgent(
        FunctionModel(broken), name="Broken", capabilities=[Instrumentation(settings=settings)]
    )
    with pytest.raises(RuntimeError):
        agent.run_sync("hi")
    [run] = runs_from_spans(exp.get_finished_spans())
    assert run.status == "failed" and run.turns == []
    assert run.error is not None and "down" in run.error


# -- OTLP JSON -----------------------------------------------------------------------------


def test_otlp_json_lines_from_the_sdk_encoder_read_as_the_spans_do(
    exporter: Any, tmp_path: Path
) -> None:
    exp, provider = exporter
    thena_run(provider)
    pydantic_agent(provider).run_sync("What is 1+2?")
    spans = exp.get_finished_spans()
    direct = runs_from_spans(spans)
    half = len(spans) // 2  # two export batches, as a collector's file exporter writes them
    path = tmp_path / "traces.jsonl"
    lines = [otlp_json(spans[:half]), otlp_json(spans[half:])]
    path.write_text("\n".join(json.dumps(json.loads(x)) for x in lines) + "\n")
    loaded = load_otlp(path)
    assert [r.run_id for r in loaded] == [r.run_id for r in direct]
    assert [comparable(r) for r in loaded] == [comparable(r) for r in direct]
    assert [type(r).__name__ for r in loaded] == ["ImportedRun", "ImportedRun"]


def test_otlp_json_with_hex_ids_as_the_spec_writes_them(exporter: Any) -> None:
    exp, provider = exporter
    run = thena_run(provider)
    document = json.loads(otlp_json(exp.get_finished_spans()))
    for resource in document["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = __import__("base64").b64decode(span[key]).hex()
    [back] = runs_from_spans(document)
    assert comparable(back) == comparable(run) and back.history == run.history


def test_input_that_is_not_otlp_or_holds_no_genai_span_gets_a_clear_error(
    tmp_path: Path, exporter: Any
) -> None:
    exp, provider = exporter
    path = tmp_path / "notes.txt"
    path.write_text("hello\nworld\n")
    with pytest.raises(ValueError, match="not OTLP JSON: line 1"):
        load_otlp(path)
    with pytest.raises(ValueError, match="resourceSpans"):
        runs_from_spans({"traces": []})
    with pytest.raises(TypeError, match="ReadableSpan"):
        runs_from_spans([1, 2])
    with provider.get_tracer("plain").start_as_current_span("GET /index"):
        pass
    with pytest.raises(ValueError, match="no GenAI spans"):
        runs_from_spans(exp.get_finished_spans())
    with pytest.raises(ValueError, match="no GenAI spans"):
        runs_from_spans(otlp_json(exp.get_finished_spans()))


# -- imported runs are ordinary runs -------------------------------------------------------


def test_an_imported_run_is_stored_shown_and_diffed(exporter: Any, tmp_path: Path) -> None:
    exp, provider = exporter
    pydantic_agent(provider, ["<script>alert(1)</script>"]).run_sync("What is 1+2?")
    [run] = runs_from_spans(exp.get_finished_spans())
    with SqliteRunStore.from_path(tmp_path / "runs.sqlite3") as store:

        async def write() -> None:
            await store.run_started(run)
            for record in records_of(run):
                await store.turn_recorded(run, record)
            await store.run_finished(run)

        asyncio.run(write())
        loaded = Run.load(run.run_id, store=store)
    assert comparable(loaded) == comparable(run) and loaded.history == run.history
    assert [t.request_key for t in loaded.turns] == [t.request_key for t in run.turns]
    again = Workflow.of(pydantic_agent(None, ["live"])).run(
        "What is 1+2?", replay=loaded, store=False
    )
    assert [t.replayed for t in again.turns] == [True, True]
    page = run.to_html(tmp_path / "run.html").read_text()
    assert "<script>alert(1)</script>" not in page and "alert(1)" in page
    assert list(run.frame()["agent"]) == ["Calc", "Calc"]
    assert run.failure_chart() is not None
    same = run.diff(loaded)
    assert same.first_divergence is None
