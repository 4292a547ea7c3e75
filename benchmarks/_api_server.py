"""The W1 loop's model as an HTTP server on 127.0.0.1, for the real adapters' benchmark.

    python -m benchmarks._api_server N        # prints its port, then serves until killed

It speaks both APIs the adapters call: `POST /v1/chat/completions` (OpenAI's, for
`OpenAICompatModel`) and `POST /v1/messages` (Anthropic's, for `AnthropicModel`), JSON only,
with keep-alive connections (HTTP/1.1) as real servers keep them. Like the W1 functions it
decides from the request alone: while fewer than N - 1 assistant messages are in the history
it calls `add(a=i, b=1)`, then it answers "done". It runs in a process of its own, so that
its work never counts in the client's CPU time. `GET /connections` says how many connections
it has accepted so far, so that the client can check how often it opened one.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_connections = 0
_lock = threading.Lock()


def _chat_completion(model: str, i: int, n: int) -> dict[str, Any]:
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
        message, finish = {"role": "assistant", "content": "done"}, "stop"
    return {
        "id": f"chatcmpl-{i}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _message(model: str, i: int, n: int) -> dict[str, Any]:
    if i < n - 1:
        content: list[dict[str, Any]] = [
            {"type": "tool_use", "id": f"toolu_{i}", "name": "add", "input": {"a": i, "b": 1}}
        ]
        stop = "tool_use"
    else:
        content, stop = [{"type": "text", "text": "done"}], "end_turn"
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


def handler(n: int) -> type[BaseHTTPRequestHandler]:
    """The request handler of a server whose loop makes `n` model calls."""

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

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            i = sum(1 for m in body["messages"] if m["role"] == "assistant")
            if self.path.endswith("/chat/completions"):
                answer = _chat_completion(body["model"], i, n)
            elif self.path.endswith("/messages"):
                answer = _message(body["model"], i, n)
            else:
                self.send_error(404)
                return
            self._send(answer)

    return Handler


def main() -> None:
    """Serve the loop of `sys.argv[1]` model calls on a free port, printed first."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(int(sys.argv[1])))
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
