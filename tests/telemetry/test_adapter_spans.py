"""Chat spans of the SDK adapters, against the local API servers: provider, server,
status codes of failed attempts, and token counts by the conventions' meaning."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from chat_completions_server import ChatCompletionsServer, Completion
from messages_api_server import MessagesAPIServer, status, text
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from thena_nb import Agent, Workflow, telemetry
from thena_nb.core.records.types import ToolCall
from thena_nb.models import AnthropicModel, OpenAICompatModel, RetryPolicy
from thena_nb.telemetry._attributes import provider_of, server_of
from thena_nb.telemetry._spans import SpanObserver

FAST = RetryPolicy(max_retries=2, initial_delay=0.0, max_delay=0.0, jitter=False)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.instrument(provider)
    yield exporter
    telemetry.uninstrument()


def test_anthropic_attempts_name_the_provider_server_and_status(spans) -> None:
    with MessagesAPIServer() as server:
        server.script(
            status(529), text("hi", input_tokens=4, cache_read_tokens=6, model="claude-test-0929")
        )
        model = AnthropicModel("claude-test", base_url=server.base_url, api_key="k")
        run = Workflow("w", [Agent("A", model=model)], retry=FAST).run("go", store=False)
        port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
    failed, ok = [s for s in spans.get_finished_spans() if s.kind is SpanKind.CLIENT]
    for span in (failed, ok):
        assert span.name == "chat claude-test"
        assert span.attributes["gen_ai.provider.name"] == "anthropic"
        assert span.attributes["server.address"] == "127.0.0.1"
        assert span.attributes["server.port"] == port
    assert failed.attributes["error.type"] == "529"
    # the Messages API counts cached tokens apart; the convention's input count includes them
    assert ok.attributes["gen_ai.usage.input_tokens"] == 10
    assert ok.attributes["gen_ai.usage.cache_read.input_tokens"] == 6
    assert ok.attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    # the model asked and the model that answered are told apart, on the span and the turn
    assert ok.attributes["gen_ai.request.model"] == "claude-test"
    assert ok.attributes["gen_ai.response.model"] == "claude-test-0929"
    [turn] = run.turns
    assert ok.attributes["gen_ai.response.id"] == turn.response_id
    assert turn.response_id is not None and turn.response_id.startswith("msg_")
    assert (turn.model, turn.response_model) == ("claude-test", "claude-test-0929")
    assert run.frame()[["model", "response_model"]].values.tolist() == [
        ["claude-test", "claude-test-0929"]
    ]
    assert "gen_ai.response.model" not in failed.attributes  # no answer: no answering model


def test_openai_compatible_attempts_name_openai_and_the_server(spans) -> None:
    with ChatCompletionsServer(
        [Completion(content="hi", prompt_tokens=12, cached_tokens=2)]
    ) as server:
        model = OpenAICompatModel("qwen-test", base_url=server.base_url)
        Workflow("w", [Agent("A", model=model)]).run("go", store=False)
    (chat,) = [s for s in spans.get_finished_spans() if s.kind is SpanKind.CLIENT]
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert chat.attributes["server.address"] == "127.0.0.1"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 12  # prompt_tokens includes cached
    assert chat.attributes["gen_ai.usage.cache_read.input_tokens"] == 2


def test_provider_and_server_come_from_the_model() -> None:
    assert provider_of(AnthropicModel("claude-sonnet-4-5")) == "anthropic"
    assert server_of(AnthropicModel("claude-sonnet-4-5"), "anthropic") == ("api.anthropic.com", 443)
    local = OpenAICompatModel("qwen2.5:7b", base_url="http://localhost:11434/v1")
    assert (provider_of(local), server_of(local, "openai")) == ("openai", ("localhost", 11434))

    class Hosted:
        name = "m"
        provider = "mistral_ai"

    assert provider_of(Hosted()) == "mistral_ai"
    assert server_of(Hosted(), "mistral_ai") is None


def test_a_gate_decision_is_on_the_tool_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observer = SpanObserver(provider.get_tracer("t"), capture_content=False)
    agent = Agent("A", model=OpenAICompatModel("m", base_url="http://127.0.0.1:9/v1"))
    call = ToolCall(id="c1", name="send_mail", arguments={"to": "x"})
    observer.tool_started(agent, call)
    observer.tool_finished(
        call, call.model_copy(update={"ok": True, "result": "sent", "decision": "edit"})
    )
    (span,) = exporter.get_finished_spans()
    assert span.attributes["thena.tool_call.decision"] == "edit"
    assert span.attributes["gen_ai.tool.call.id"] == "c1"


_GLOBAL_PROVIDER_RUN = """
import sys
import anthropic
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from thena_nb import Agent, Workflow, telemetry
from thena_nb.models import AnthropicModel

base_url = sys.argv[1]
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)  # as an application sets OpenTelemetry up
telemetry.instrument()  # to the global provider
models = {
    "built": AnthropicModel("claude-test", base_url=base_url, api_key="k"),
    "given": AnthropicModel(
        "claude-test", client=anthropic.AsyncAnthropic(base_url=base_url, api_key="k")
    ),
}
for name, model in models.items():
    exporter.clear()
    Workflow("w", [Agent("A", model=model)]).run("go", store=False)
    for span in exporter.get_finished_spans():
        if span.kind is SpanKind.CLIENT:
            tokens = span.attributes.get("gen_ai.usage.input_tokens")
            print(name, span.instrumentation_scope.name, span.name, tokens)
"""


def test_one_chat_span_per_call_under_a_global_tracer_provider() -> None:
    """With the global tracer provider set, as applications set OpenTelemetry up, a call
    through the client `AnthropicModel` builds makes one CLIENT span, thena_nb's: the SDK's
    own span of the call, which would count its tokens a second time, is off. A `client=`
    the user gave keeps the SDK's settings, its span included."""
    with MessagesAPIServer() as server:
        server.script(text("hi", input_tokens=4), text("hi", input_tokens=4))
        done = subprocess.run(
            [sys.executable, "-c", _GLOBAL_PROVIDER_RUN, server.base_url],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    rows = [line.split(" ", 2) for line in done.stdout.splitlines()]
    assert rows[0] == ["built", "thena_nb", "chat claude-test 4"]
    assert len(rows) == 1 + 2, rows  # then the given client's two: the SDK's and thena_nb's
    given = sorted(row[1] for row in rows[1:] if row[0] == "given")
    assert given[0] != "thena_nb" and given[1] == "thena_nb"
