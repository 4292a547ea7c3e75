"""A chat completions server on 127.0.0.1 for tests of `OpenAICompatModel`.

It speaks the OpenAI chat completions API (JSON and SSE streaming) from a script of
responses, injects faults on demand, records every request, and rejects requests the way a
real server does: a `tool` message must answer a `tool_calls` id of the assistant message
before it, every such id must be answered, `arguments` must be strings, `model` must be set.
With `tools_supported=False` it also rejects `tools`, `tool_calls` and `tool` messages with
400, as a server whose model has no tool support does.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "ChatCompletionsServer",
    "Completion",
    "Drop",
    "Fault",
    "Recorded",
    "Slow",
]


@dataclass(frozen=True)
class Completion:
    """One scripted answer; sent as JSON, or as SSE chunks when the request streams.

    `tool_calls` holds `(id, name, arguments)` with `arguments` sent as given when it is a
    string (so tests can send broken JSON) and JSON-encoded otherwise. With `drop_after`, a
    streamed answer stops after that many chunks and the connection is closed; with
    `error_event`, it sends its text and then `data: {"error": error_event}` (as vLLM does
    when generation fails mid-stream). `reasoning` goes in the message's (or the deltas')
    `reasoning_field` beside the content, as reasoning servers send it, and
    `reasoning_tokens` in `usage.completion_tokens_details`.
    """

    content: str | None = None
    tool_calls: tuple[tuple[str | None, str, str | dict[str, Any]], ...] = ()
    finish_reason: str | None = None
    prompt_tokens: int = 10
    completion_tokens: int = 5
    cached_tokens: int | None = None
    drop_after: int | None = None
    error_event: dict[str, Any] | None = None
    reasoning: str | None = None
    reasoning_field: str = "reasoning_content"
    reasoning_tokens: int | None = None


@dataclass(frozen=True)
class Fault:
    """An error response: `status` with an OpenAI-style error body and extra headers."""

    status: int
    message: str = "fault"
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None
    """A raw body to send instead of the JSON error object."""
    content_type: str = "application/json"


@dataclass(frozen=True)
class Slow:
    """Wait `seconds` before answering with `then` (past the client's timeout, usually)."""

    seconds: float
    then: Completion | Fault = field(default_factory=Completion)


@dataclass(frozen=True)
class Drop:
    """Close the connection without answering."""


Scripted = Completion | Fault | Slow | Drop | Callable[[dict[str, Any]], "Completion | Fault"]


@dataclass(frozen=True)
class Recorded:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    client: tuple[str, int] = ("", 0)
    """The client's address and port: requests on one connection share it."""
    raw: bytes = b""
    """The body's bytes, as they came."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The request's `messages`."""
        return list(self.body.get("messages", []))


class ChatCompletionsServer:
    """A chat completions server on 127.0.0.1 answering from a script.

    Args:
        script: The answers, one per request, in order.
        tools_supported: `False` rejects any request with tools, as servers without tool
            support do.

    Example:
        >>> with ChatCompletionsServer([Completion("hi")]) as server:
        ...     server.base_url.startswith("http://127.0.0.1:")
        True
    """

    def __init__(
        self, script: Sequence[Scripted] | None = None, *, tools_supported: bool = True
    ) -> None:
        self.script: list[Scripted] = list(script or [])
        self.tools_supported = tools_supported
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        """The API root to give the client, e.g. `http://127.0.0.1:5123/v1`."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def add(self, *answers: Scripted) -> None:
        """Append answers to the script."""
        with self._lock:
            self.script.extend(answers)

    def __enter__(self) -> ChatCompletionsServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def _next(self, body: dict[str, Any]) -> Completion | Fault | Slow | Drop:
        with self._lock:
            if not self.script:
                return Fault(400, f"script exhausted at request {len(self.requests)}")
            item = self.script.pop(0)
        if isinstance(item, Completion | Fault | Slow | Drop):
            return item
        return item(body)


def validate(body: dict[str, Any], *, tools_supported: bool) -> str | None:
    """Why a real server would reject `body`, or `None` when it would accept it."""
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "you must provide a model parameter"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty array"
    if not tools_supported and "tools" in body:
        return f"model {body['model']!r} does not support tools"
    pending: set[str] = set()
    for i, msg in enumerate(messages):
        problem = _check_message(i, msg, pending, tools_supported=tools_supported)
        if problem:
            return problem
        if msg["role"] == "assistant":
            pending = {tc["id"] for tc in msg.get("tool_calls") or []}
    if pending:
        return f"tool_call_ids did not have response messages: {sorted(pending)}"
    return None


def _check_message(i: int, msg: Any, pending: set[str], *, tools_supported: bool) -> str | None:
    where = f"messages[{i}]"
    if not isinstance(msg, dict) or msg.get("role") not in ("system", "user", "assistant", "tool"):
        return f"{where}: invalid role"
    role = msg["role"]
    if role != "tool" and pending:
        return (
            "An assistant message with 'tool_calls' must be followed by tool messages "
            f"responding to each 'tool_call_id'. Missing: {sorted(pending)} before {where}"
        )
    if role == "tool":
        if not tools_supported:
            return f"{where}: role 'tool' is not supported by this model"
        if msg.get("tool_call_id") not in pending:
            return (
                f"{where}: messages with role 'tool' must be a response to a preceding "
                f"message with 'tool_calls' (tool_call_id {msg.get('tool_call_id')!r})"
            )
        pending.discard(msg["tool_call_id"])
        if not isinstance(msg.get("content"), str):
            return f"{where}: content must be a string"
        return None
    calls = msg.get("tool_calls")
    if role == "assistant" and calls is not None:
        if not tools_supported:
            return f"{where}: tool_calls are not supported by this model"
        for tc in calls:
            fn = tc.get("function") or {}
            if not tc.get("id") or tc.get("type") != "function" or not fn.get("name"):
                return f"{where}: every tool call needs an id, type 'function' and a name"
            if not isinstance(fn.get("arguments"), str):
                return f"{where}: tool call arguments must be a string"
    elif not isinstance(msg.get("content"), str):
        return f"{where}: content must be a string"
    return None


def _handler(server: ChatCompletionsServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                self._json(400, _error("request body is not JSON"))
                return
            with server._lock:
                headers = {k.lower(): v for k, v in self.headers.items()}
                client = (str(self.client_address[0]), int(self.client_address[1]))
                server.requests.append(Recorded(self.path, headers, body, client, raw))
            if self.path != "/v1/chat/completions":
                self._json(404, _error(f"no route {self.path}"))
                return
            problem = validate(body, tools_supported=server.tools_supported)
            if problem:
                self._json(400, _error(problem))
                return
            self._answer(server._next(body), body)

        def _answer(self, item: Completion | Fault | Slow | Drop, body: dict[str, Any]) -> None:
            if isinstance(item, Slow):
                time.sleep(item.seconds)
                item = item.then
            if isinstance(item, Drop):
                self._drop()
            elif isinstance(item, Fault):
                payload = item.body if item.body is not None else json.dumps(_error(item.message))
                self._send(item.status, payload.encode(), item.content_type, item.headers)
            elif body.get("stream"):
                self._stream(item, body)
            else:
                self._json(200, completion_json(item, body["model"]))

        def _stream(self, item: Completion, body: dict[str, Any]) -> None:
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for n, chunk in enumerate(stream_chunks(item, body["model"], include_usage)):
                if item.drop_after is not None and n >= item.drop_after:
                    self._drop()
                    return
                self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")

        def _chunk(self, data: bytes) -> None:
            # HTTP/1.1 chunked framing, so a connection closed mid-stream is an error.
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            self._send(status, json.dumps(payload).encode(), "application/json", {})

        def _send(self, status: int, data: bytes, ctype: str, headers: dict[str, str]) -> None:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _drop(self) -> None:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True

    return Handler


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


def _usage(item: Completion) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": item.prompt_tokens,
        "completion_tokens": item.completion_tokens,
        "total_tokens": item.prompt_tokens + item.completion_tokens,
    }
    if item.cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": item.cached_tokens}
    if item.reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": item.reasoning_tokens}
    return usage


def _arguments(arguments: str | dict[str, Any]) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _finish(item: Completion) -> str:
    return item.finish_reason or ("tool_calls" if item.tool_calls else "stop")


def completion_json(item: Completion, model: str) -> dict[str, Any]:
    """`item` as a `chat.completion` object."""
    message: dict[str, Any] = {"role": "assistant", "content": item.content}
    if item.reasoning is not None:
        message[item.reasoning_field] = item.reasoning
    if item.tool_calls:
        message["tool_calls"] = [
            {
                **({"id": call_id} if call_id is not None else {}),
                "type": "function",
                "function": {"name": name, "arguments": _arguments(args)},
            }
            for call_id, name, args in item.tool_calls
        ]
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(item)}],
        "usage": _usage(item),
    }


def stream_chunks(item: Completion, model: str, include_usage: bool) -> Iterator[dict[str, Any]]:
    """`item` as `chat.completion.chunk` objects: text in pieces of a few characters, each
    tool call as a head (id, name) and its arguments in pieces, then the finish reason and
    the usage."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(item.reasoning or "", 4):
        yield chunk({item.reasoning_field: piece})
    for piece in _pieces(item.content or "", 4):
        yield chunk({"content": piece})
    if item.error_event is not None:
        yield {"error": item.error_event}
        return
    for index, (call_id, name, args) in enumerate(item.tool_calls):
        head: dict[str, Any] = {"index": index, "type": "function"}
        if call_id is not None:
            head["id"] = call_id
        head["function"] = {"name": name, "arguments": ""}
        yield chunk({"tool_calls": [head]})
        for piece in _pieces(_arguments(args), 5):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, _finish(item))
    if include_usage:
        yield {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": model,
            "choices": [],
            "usage": _usage(item),
        }


def _pieces(text: str, size: int) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start : start + size]
