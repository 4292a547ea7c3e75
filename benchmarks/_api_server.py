"""The W1 loop's model as an HTTP server on 127.0.0.1, for the real adapters' benchmark.

    python -m benchmarks._api_server N [WORDS]   # prints its port, then serves until killed

It speaks both APIs the adapters call, `POST /v1/chat/completions` (OpenAI's, for
`OpenAICompatModel`) and `POST /v1/messages` (Anthropic's, for `AnthropicModel`), as JSON or,
when the request sets `stream`, as SSE chunks or events of four characters of text each, the
way servers stream tokens, with keep-alive connections (HTTP/1.1) as real servers keep them.
Like the W1 functions it decides from the request alone: while fewer than N - 1 assistant
messages are in the history it calls `add(a=i, b=1)`, then it answers "done" (or, given
WORDS, "done" and WORDS more words: a long answer to stream). It runs in a process of its
own, so that its work never counts in the client's CPU time. `GET /connections` says how many
connections it has accepted so far, so that the client can check how often it opened one.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_connections = 0
_lock = threading.Lock()


def _final_text(words: int) -> str:
    return "done" + " word" * words


def _chat_completion(model: str, i: int, n: int, words: int = 0) -> dict[str, Any]:
    message: dict[str, Any]
    if i < n - 1:
        call = {"name": "add", "arguments": json.dumps({"a": i, "b": 1})}
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": f"call_{i}", "type": "function", "function": call}],
        }
        finish = "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": _final_text(words)}, "stop"
    return {
        "id": f"chatcmpl-{i}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _chunks(completion: dict[str, Any], usage: bool) -> list[dict[str, Any]]:
    """`completion` as the chunks a server streams it in: the role, the text four characters
    at a time, each call's id and name and then its arguments, the finish reason, and the
    usage in a chunk of its own when the request asked for it."""
    choice = completion["choices"][0]
    message = choice["message"]
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    text = message.get("content") or ""
    deltas += [{"content": text[k : k + 4]} for k in range(0, len(text), 4)]
    for index, call in enumerate(message.get("tool_calls") or ()):
        head = {"index": index, "id": call["id"], "type": "function"}
        deltas.append({"tool_calls": [{**head, "function": {"name": call["function"]["name"]}}]})
        arguments = {"arguments": call["function"]["arguments"]}
        deltas.append({"tool_calls": [{"index": index, "function": arguments}]})
    base = {key: completion[key] for key in ("id", "created", "model")}
    base["object"] = "chat.completion.chunk"
    out = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    out.append(
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]}
    )
    if usage:
        out.append({**base, "choices": [], "usage": completion["usage"]})
    return out


def _events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """`message` as the events the Messages API streams it in: its start, each block's start,
    deltas (text four characters at a time, a tool's input in one JSON piece) and stop, then
    the stop reason with the output tokens, and the stop."""
    start = {**message, "content": [], "stop_reason": None}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": start})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opening: dict[str, Any] = {"type": "text", "text": ""}
            text = block["text"]
            deltas = [
                {"type": "text_delta", "text": text[k : k + 4]} for k in range(0, len(text), 4)
            ]
        else:
            opening = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        events.append(("content_block_start", {"index": index, "content_block": opening}))
        events += [("content_block_delta", {"index": index, "delta": d}) for d in deltas]
        events.append(("content_block_stop", {"index": index}))
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    usage = {"output_tokens": message["usage"]["output_tokens"]}
    events += [("message_delta", {"delta": stop, "usage": usage}), ("message_stop", {})]
    return [(name, {"type": name, **data}) for name, data in events]


def _message(model: str, i: int, n: int, words: int = 0) -> dict[str, Any]:
    if i < n - 1:
        content: list[dict[str, Any]] = [
            {"type": "tool_use", "id": f"toolu_{i}", "name": "add", "input": {"a": i, "b": 1}}
        ]
        stop = "tool_use"
    else:
        content, stop = [{"type": "text", "text": _final_text(words)}], "end_turn"
    return {
        "id": f"msg_{i}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def handler(n: int, words: int = 0) -> type[BaseHTTPRequestHandler]:
    """The request handler of a server whose loop makes `n` model calls (its last answer
    `words` words longer than "done")."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real API servers

        disable_nagle_algorithm = True  # an answer is sent at once, as real servers send it

        def setup(self) -> None:
            global _connections
            super().setup()
            with _lock:
                _connections += 1

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if self.path != "/connections":
                self.send_error(404)
                return
            self._send({"connections": _connections})

        def _send(self, answer: dict[str, Any]) -> None:
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, events: list[str]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for text in events:
                event = f"{text}\n\n".encode()
                self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            i = sum(1 for m in body["messages"] if m["role"] == "assistant")
            if self.path.endswith("/chat/completions"):
                answer = _chat_completion(body["model"], i, n, words)
                if body.get("stream"):
                    usage = bool((body.get("stream_options") or {}).get("include_usage"))
                    chunks = [f"data: {json.dumps(c)}" for c in _chunks(answer, usage)]
                    self._stream([*chunks, "data: [DONE]"])
                    return
            elif self.path.endswith("/messages"):
                answer = _message(body["model"], i, n, words)
                if body.get("stream"):
                    self._stream([f"event: {e}\ndata: {json.dumps(d)}" for e, d in _events(answer)])
                    return
            else:
                self.send_error(404)
                return
            self._send(answer)

    return Handler


def main() -> None:
    """Serve the loop of `sys.argv[1]` model calls (the last answer `sys.argv[2]` words
    longer, when given) on a free port, printed first."""
    words = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(int(sys.argv[1]), words))
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
