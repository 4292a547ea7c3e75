"""End to end over OTLP/HTTP: the SDK's exporter posts protobuf to a receiver on 127.0.0.1,
which decodes it with `opentelemetry-proto`, as a collector would."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from helpers import add_call, calc
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from thena_nb import Workflow, loop, telemetry, until_answered


class Receiver:
    """Accepts `POST /v1/traces` and keeps every decoded `ExportTraceServiceRequest`."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.content_types: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.requests.append(request)
                receiver.content_types.append(self.headers.get("Content-Type", ""))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1/traces"

    def spans(self) -> list[Span]:
        return [
            span
            for request in self.requests
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.thread.start()
    yield r
    r.httpd.shutdown()
    r.httpd.server_close()


def value(span: Span, key: str) -> Any:
    for kv in span.attributes:
        if kv.key == key:
            which = kv.value.WhichOneof("value")
            v = getattr(kv.value, which)
            return list(x.string_value for x in v.values) if which == "array_value" else v
    raise KeyError(key)


def test_a_run_reaches_an_otlp_http_receiver_as_genai_spans(receiver: Receiver) -> None:
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=receiver.endpoint)))
    telemetry.instrument(provider)
    try:
        agent = calc([add_call(1, 2), "done"])
        run = Workflow("sums", [loop(steps=[agent], until=until_answered)]).run("go", store=False)
    finally:
        telemetry.uninstrument()
        provider.shutdown()  # flushes the batch
    assert receiver.requests and set(receiver.content_types) == {"application/x-protobuf"}
    scopes = {
        (scope.scope.name, scope.schema_url)
        for request in receiver.requests
        for resource in request.resource_spans
        for scope in resource.scope_spans
    }
    assert scopes == {("thena_nb", telemetry.SCHEMA_URL)}
    spans = receiver.spans()
    by_name = {s.name: s for s in spans}
    assert sorted(s.name for s in spans) == [
        "chat scripted",
        "chat scripted",
        "execute_tool add",
        "invoke_agent Calc",
        "invoke_agent Calc",
        "invoke_workflow sums",
        "thena.loop sums/0.loop",
    ]
    workflow, loop_span = by_name["invoke_workflow sums"], by_name["thena.loop sums/0.loop"]
    tool_span = by_name["execute_tool add"]
    assert len({s.trace_id for s in spans}) == 1
    assert workflow.parent_span_id == b"" and loop_span.parent_span_id == workflow.span_id
    turn_ids = {s.span_id for s in spans if s.name == "invoke_agent Calc"}
    assert tool_span.parent_span_id in turn_ids
    assert {s.kind for s in spans if s.name.startswith("chat ")} == {Span.SPAN_KIND_CLIENT}
    assert workflow.kind == Span.SPAN_KIND_INTERNAL
    assert value(workflow, "gen_ai.conversation.id") == run.run_id
    assert value(tool_span, "gen_ai.tool.name") == "add"
    assert value(by_name["thena.loop sums/0.loop"], "thena.loop.stop_reason") == "until"
    chat = next(s for s in spans if s.name.startswith("chat "))
    assert value(chat, "gen_ai.response.finish_reasons") == ["tool_use"]
