"""A Messages API server on 127.0.0.1 for testing `AnthropicModel` through the real SDK.

It answers `POST /v1/messages` with scripted replies, as JSON or as an SSE stream, fails on
demand (an error status with headers, a reply slower than the client's timeout, a connection
cut mid-reply, an `error` event inside a stream, an error that echoes the API key, a raw
body that is no API answer), and checks every request the way the
real API does: roles alternate and start with `user`, each `tool_result` answers a
`tool_use` of the previous message and comes first in its message, every `tool_use` is
answered, no empty text blocks, at most four `cache_control` breakpoints. A request it
rejects gets an API-shaped 400 and consumes no scripted item. It records every request.

Extended thinking: `thinking(...)` puts `thinking` (and `redacted_thinking`) blocks first
in an answer, each signed by this server. Like the real API, the server then rejects any
thinking block whose signature (or redacted `data`) it did not issue for exactly that
block, and, with `thinking` on, a request whose last assistant message called tools but
does not start with the reasoning blocks of the answer that made those calls, all of them,
unchanged and in order.

    with MessagesAPIServer() as server:
        server.script(text("Hello"), status(529), tool_use("add", {"a": 1}))
        model = AnthropicModel("claude-test", base_url=server.base_url, api_key="k")
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import re
import secrets
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

__all__ = [
    "Answer",
    "Fault",
    "MessagesAPIServer",
    "RecordedRequest",
    "drop",
    "echo_key",
    "raw",
    "redacted_thinking_block",
    "slow",
    "status",
    "stream_error",
    "text",
    "thinking",
    "thinking_block",
    "tool_use",
    "tool_uses",
    "truncate",
    "validate",
]

Json = dict[str, Any]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_STATUS_OF_TYPE = {kind: code for code, kind in _ERROR_TYPES.items()}
_ALLOWED_FIELDS = {
    "model", "max_tokens", "messages", "system", "tools", "tool_choice", "stream",
    "metadata", "stop_sequences", "temperature", "top_p", "top_k", "thinking",
    "service_tier", "cache_control", "container", "output_config", "inference_geo",
}  # fmt: skip
_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_REASONING = ("thinking", "redacted_thinking")
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")


@dataclass(frozen=True)
class Answer:
    """A successful reply: content blocks, stop reason and usage."""

    content: list[Json]
    stop_reason: str = "end_turn"
    input_tokens: int = 10
    output_tokens: int = 5
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    thinking_tokens: int | None = None
    """Sent as `usage.output_tokens_details.thinking_tokens` when set."""
    delay: float = 0.0
    """Seconds to wait before answering."""
    model: str | None = None
    """The model the answer says answered (e.g. a dated snapshot); the one asked if `None`."""


@dataclass(frozen=True)
class Fault:
    """A failure to serve instead of a reply."""

    kind: Literal["status", "drop", "truncate", "stream_error", "echo", "raw"]
    status: int = 500
    error_type: str = "api_error"
    message: str = "Internal server error"
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""
    """The bytes of a `raw` fault, as text."""


Item = Answer | Fault

_ids = itertools.count(1)


def text(reply: str, **usage: Any) -> Answer:
    """A text answer; keywords set `stop_reason`, token counts or `delay`."""
    return Answer(content=[{"type": "text", "text": reply}], **usage)


def tool_use(
    name: str, arguments: Json, *, id: str | None = None, text: str = "", **usage: Any
) -> Answer:
    """One `tool_use` block (after `text` when given), stop reason `tool_use`."""
    return tool_uses([(name, arguments, id)], text=text, **usage)


def tool_uses(calls: list[tuple[str, Json, str | None]], *, text: str = "", **usage: Any) -> Answer:
    """Several `tool_use` blocks in one answer; a `None` id is generated."""
    content: list[Json] = [{"type": "text", "text": text}] if text else []
    for name, arguments, call_id in calls:
        content.append(
            {
                "type": "tool_use",
                "id": call_id or f"toolu_{next(_ids):04d}",
                "name": name,
                "input": arguments,
            }
        )
    usage.setdefault("stop_reason", "tool_use")
    return Answer(content=content, **usage)


_SECRET = secrets.token_bytes(16)
"""What this process's servers sign thinking blocks with: only they can make a valid one."""
_THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


def _sign(kind: str, value: str) -> str:
    digest = hmac.new(_SECRET, f"{kind}\x00{value}".encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def thinking_block(thought: str) -> Json:
    """A `thinking` block with the signature this server checks when it comes back."""
    return {"type": "thinking", "thinking": thought, "signature": _sign("thinking", thought)}


def redacted_thinking_block(secret: str = "redacted reasoning") -> Json:
    """A `redacted_thinking` block: opaque `data` this server can verify, nothing readable."""
    payload = base64.b64encode(secret.encode()).decode()
    return {"type": "redacted_thinking", "data": f"{payload}.{_sign('redacted', payload)}"}


def thinking(
    thought: str, answer: Answer, *, redacted: bool = False, thinking_tokens: int | None = None
) -> Answer:
    """`answer` with a signed `thinking` block first (and a `redacted_thinking` block after
    it with `redacted=True`)."""
    blocks = [thinking_block(thought)] + ([redacted_thinking_block()] if redacted else [])
    return replace(answer, content=blocks + answer.content, thinking_tokens=thinking_tokens)


def _signed(block: Json) -> bool:
    if block["type"] == "thinking":
        thought, signature = block.get("thinking"), block.get("signature")
        return (
            isinstance(thought, str)
            and isinstance(signature, str)
            and hmac.compare_digest(signature, _sign("thinking", thought))
        )
    payload, _, signature = str(block.get("data", "")).rpartition(".")
    return bool(payload) and hmac.compare_digest(signature, _sign("redacted", payload))


def slow(seconds: float, answer: Answer | None = None) -> Answer:
    """An answer sent only after `seconds` (pass more than the client's timeout)."""
    return replace(answer or text("late"), delay=seconds)


def status(
    code: int,
    message: str | None = None,
    *,
    error_type: str | None = None,
    headers: dict[str, str] | None = None,
) -> Fault:
    """An error response with the API's error body.

    Example: `status(429, headers={"retry-after": "2"})`.
    """
    kind = error_type or _ERROR_TYPES.get(code, "api_error")
    return Fault("status", code, kind, message or f"scripted {kind}", dict(headers or {}))


def echo_key(code: int = 401) -> Fault:
    """An error status whose body (its message, and a field of its own) and `x-echoed-key`
    header repeat the API key the request carried, as a careless server or proxy does."""
    return Fault("echo", code, _ERROR_TYPES.get(code, "api_error"), "invalid x-api-key")


def raw(body: str, *, code: int = 200, content_type: str = "application/json") -> Fault:
    """Answer with `body` as it is (not JSON, or JSON that is no message)."""
    return Fault("raw", code, "", "", {"content-type": content_type}, body)


def drop() -> Fault:
    """Cut the connection mid-reply (after half the JSON body, or after the first SSE events)."""
    return Fault("drop")


def truncate() -> Fault:
    """End an SSE stream cleanly but early, before `message_stop` (a cut JSON body otherwise)."""
    return Fault("truncate")


def stream_error(error_type: str = "overloaded_error", message: str = "Overloaded") -> Fault:
    """An `error` event inside a 200 SSE stream (a plain error status when not streaming)."""
    return Fault("stream_error", _STATUS_OF_TYPE.get(error_type, 500), error_type, message)


@dataclass
class RecordedRequest:
    """One request the server received and what it answered."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int = 0
    error: str | None = None
    """The validation or scripting problem the server answered with, if any."""
    raw: bytes = b""
    """The body's bytes, as they came."""


@dataclass
class _Route:
    when: Callable[[Json], bool]
    items: list[Item]


class MessagesAPIServer:
    """A threaded HTTP server speaking the Messages API on 127.0.0.1 (port chosen by the OS).

    Args:
        api_key: When set, any other key (`x-api-key` or `authorization: Bearer`) gets a 401.
    """

    def __init__(self, *, api_key: str | None = None) -> None:
        self.api_key = api_key
        self.requests: list[RecordedRequest] = []
        self.reasoning_of: dict[str, list[Json]] = {}
        """For each `tool_use` id served, the reasoning blocks of the answer that made it."""
        self._routes: list[_Route] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_class(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>`."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> MessagesAPIServer:
        """Start serving in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; slow replies still waiting give up."""
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> MessagesAPIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def script(self, *items: Item, when: str | Callable[[Json], bool] | None = None) -> None:
        """Queue items to serve in order to requests that match `when`.

        Args:
            items: Answers and faults, one per request.
            when: A string that must occur in the request's system prompt, or a predicate
                on the request body; `None` matches every request. Routes are tried in the
                order they were added; one with items left that matches serves.
        """
        match when:
            case None:
                predicate: Callable[[Json], bool] = lambda body: True
            case str():
                predicate = lambda body: when in _system_text(body)
            case _:
                predicate = when
        with self._lock:
            self._routes.append(_Route(predicate, list(items)))

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies of every request, in arrival order."""
        return [request.body for request in self.requests]

    @property
    def rejected(self) -> list[RecordedRequest]:
        """Requests answered 400 because they were invalid or unscripted."""
        return [request for request in self.requests if request.status == 400]

    def remaining(self) -> int:
        """Scripted items not served yet."""
        with self._lock:
            return sum(len(route.items) for route in self._routes)

    def _next_item(self, body: Json) -> Item | None:
        with self._lock:
            for route in self._routes:
                if route.items and route.when(body):
                    return route.items.pop(0)
        return None

    def _served(self, answer: Answer) -> None:
        """Remember which reasoning led to each call, to check the continuation."""
        reasoning = [block for block in answer.content if block["type"] in _REASONING]
        with self._lock:
            for block in answer.content:
                if block["type"] == "tool_use":
                    self.reasoning_of[block["id"]] = reasoning


def _system_text(body: Json) -> str:
    system = body.get("system", "")
    if isinstance(system, list):
        return "\n".join(str(block.get("text", "")) for block in system if isinstance(block, dict))
    return str(system)


# --- validation ------------------------------------------------------------------------


def validate(body: Any, reasoning_of: Mapping[str, list[Json]] | None = None) -> str | None:
    """The API's error message for an invalid request body, or `None` when it is valid.

    Args:
        body: The request body.
        reasoning_of: For each `tool_use` id served, the reasoning blocks of its answer (the
            server's `reasoning_of`): with `thinking` on, the continuation must send them back.
    """
    if not isinstance(body, dict):
        return "body: Input should be a valid dictionary"
    for name in body:
        if name not in _ALLOWED_FIELDS:
            return f"{name}: Extra inputs are not permitted"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: Field required"
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        return "max_tokens: Field required (an integer >= 1)"
    if "stream" in body and not isinstance(body["stream"], bool):
        return "stream: Input should be a valid boolean"
    checks = (_check_system, _check_tools, _check_messages, _check_cache_control, _check_thinking)
    for check in checks:
        problem = check(body)
        if problem:
            return problem
    return _check_latest_reasoning(body, reasoning_of or {})


def _check_text_block(block: Any, where: str) -> str | None:
    if not isinstance(block, dict) or block.get("type") != "text":
        return f"{where}: Input should be a text block"
    if not isinstance(block.get("text"), str) or not block["text"]:
        return f"{where}.text: text content blocks must be non-empty"
    if not block["text"].strip():
        return f"{where}.text: text content blocks must contain non-whitespace text"
    return _check_cache_value(block, where)


def _check_cache_value(block: Json, where: str) -> str | None:
    if "cache_control" in block:
        value = block["cache_control"]
        if not isinstance(value, dict) or value.get("type") != "ephemeral":
            return f"{where}.cache_control: Input tag should be 'ephemeral'"
    return None


def _check_system(body: Json) -> str | None:
    system = body.get("system")
    if system is None or isinstance(system, str):
        return None
    if not isinstance(system, list):
        return "system: Input should be a valid string or list of text blocks"
    for index, block in enumerate(system):
        problem = _check_text_block(block, f"system.{index}")
        if problem:
            return problem
    return None


def _check_tools(body: Json) -> str | None:
    tools = body.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list):
        return "tools: Input should be a valid list"
    names: set[str] = set()
    for index, tool in enumerate(tools):
        where = f"tools.{index}"
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            return f"{where}.name: Field required"
        if not _TOOL_NAME.match(tool["name"]):
            return f"{where}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
        if tool["name"] in names:
            return "tools: Tool names must be unique."
        names.add(tool["name"])
        schema = tool.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            return f"{where}.input_schema: Input should be a JSON schema of type 'object'"
        if "description" in tool and not isinstance(tool["description"], str):
            return f"{where}.description: Input should be a valid string"
        extra = set(tool) - {"name", "description", "input_schema", "cache_control", "type"}
        if extra:
            return f"{where}.{sorted(extra)[0]}: Extra inputs are not permitted"
        problem = _check_cache_value(tool, where)
        if problem:
            return problem
    return None


def _check_messages(body: Json) -> str | None:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: Field required (at least one message)"
    seen_ids: set[str] = set()
    for index in range(len(messages)):
        problem = _check_message(messages, index, seen_ids)
        if problem:
            return problem
    last = messages[-1]
    if last["role"] == "assistant":
        content = last["content"]
        final = content if isinstance(content, str) else content[-1].get("text", "")
        if isinstance(final, str) and final != final.rstrip():
            return "messages: final assistant content cannot end with trailing whitespace"
    return None


def _check_message(messages: list[Any], index: int, seen_ids: set[str]) -> str | None:
    message = messages[index]
    where = f"messages.{index}"
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
        return f"{where}.role: Input should be 'user' or 'assistant'"
    role = message["role"]
    if index == 0 and role != "user":
        return 'messages: first message must use the "user" role'
    if index > 0 and messages[index - 1].get("role") == role:
        return (
            'messages: roles must alternate between "user" and "assistant", '
            f'but found multiple "{role}" roles in a row'
        )
    extra = set(message) - {"role", "content"}
    if extra:
        return f"{where}.{sorted(extra)[0]}: Extra inputs are not permitted"
    content = message.get("content")
    if isinstance(content, str):
        return (
            None
            if content.strip()
            else f"{where}.content: text content blocks must contain non-whitespace text"
        )
    if not isinstance(content, list) or not content:
        return f"{where}.content: messages must have non-empty content"
    for position, block in enumerate(content):
        problem = _check_block(block, role, f"{where}.content.{position}", seen_ids)
        if problem:
            return problem
    if role == "user":
        return _check_results(messages, index)
    return _check_uses_answered(messages, index)


def _check_block(block: Any, role: str, where: str, seen_ids: set[str]) -> str | None:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text":
        problem = _check_text_block(block, where)
        if problem:
            return problem
        extra = set(block) - {"type", "text", "cache_control", "citations"}
        return f"{where}.{sorted(extra)[0]}: Extra inputs are not permitted" if extra else None
    if kind == "tool_use" and role == "assistant":
        if not isinstance(block.get("id"), str) or not _ID.match(block["id"]):
            return f"{where}.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
        if block["id"] in seen_ids:
            return f"{where}: `tool_use` ids must be unique, found {block['id']!r} twice"
        seen_ids.add(block["id"])
        if not isinstance(block.get("name"), str) or not isinstance(block.get("input"), dict):
            return f"{where}: `tool_use` blocks need a `name` and an `input` object"
        return _check_cache_value(block, where)
    if kind in _REASONING and role == "assistant":
        return _check_reasoning_block(block, where)
    if kind == "tool_result" and role == "user":
        if not isinstance(block.get("tool_use_id"), str):
            return f"{where}.tool_use_id: Field required"
        content = block.get("content")
        if isinstance(content, str) and not content.strip():
            return f"{where}.content: text content blocks must contain non-whitespace text"
        if isinstance(content, list):
            for position, part in enumerate(content):
                problem = _check_text_block(part, f"{where}.content.{position}")
                if problem:
                    return problem
        if "is_error" in block and not isinstance(block["is_error"], bool):
            return f"{where}.is_error: Input should be a valid boolean"
        extra = set(block) - {"type", "tool_use_id", "content", "is_error", "cache_control"}
        if extra:
            return f"{where}.{sorted(extra)[0]}: Extra inputs are not permitted"
        return _check_cache_value(block, where)
    return f"{where}.type: block type {kind!r} is not allowed in a {role!r} message"


def _check_reasoning_block(block: Json, where: str) -> str | None:
    allowed = {"type", "thinking", "signature"} if block["type"] == "thinking" else {"type", "data"}
    extra = set(block) - allowed
    if extra:
        return f"{where}.{sorted(extra)[0]}: Extra inputs are not permitted"
    if not _signed(block):
        field = "signature" if block["type"] == "thinking" else "data"
        return f"{where}: Invalid `{field}` in `{block['type']}` block"
    return None


def _check_thinking(body: Json) -> str | None:
    config = body.get("thinking")
    if config is None:
        return None
    if not isinstance(config, dict) or config.get("type") not in (
        "enabled",
        "disabled",
        "adaptive",
    ):
        return "thinking: Input tag should be 'enabled', 'disabled' or 'adaptive'"
    if config["type"] != "enabled":
        return None
    budget = config.get("budget_tokens")
    if not isinstance(budget, int) or budget < 1024:
        return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
    if body["max_tokens"] <= budget:
        return (
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
            f"documentation at {_THINKING_DOCS}#max-tokens-and-context-window-size"
        )
    return None


def _check_latest_reasoning(body: Json, reasoning_of: Mapping[str, list[Json]]) -> str | None:
    """With thinking on, the last assistant message that called tools starts with the
    reasoning blocks of the answer that made those calls, unchanged."""
    if (body.get("thinking") or {}).get("type") in (None, "disabled"):
        return None
    messages = body["messages"]
    index = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
    if index is None or not _tool_use_ids(messages[index]):
        return None
    content = messages[index]["content"]
    if content[0]["type"] not in _REASONING:
        return (
            f"messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
            f"found `{content[0]['type']}`. When `thinking` is enabled, a final `assistant` "
            "message must start with a thinking block (preceeding the lastmost set of "
            "`tool_use` and `tool_result` blocks). We recommend you include thinking blocks "
            "from previous turns. To avoid this requirement, disable `thinking`. Please "
            f"consult our documentation at {_THINKING_DOCS}"
        )
    issued = [reasoning_of[i] for i in _tool_use_ids(messages[index]) if i in reasoning_of]
    expected = issued[0] if issued else [b for b in content if b["type"] in _REASONING]
    for position, block in enumerate(content):
        if position < len(expected):
            unchanged = block == expected[position]
        else:
            unchanged = block["type"] not in _REASONING
        if not unchanged:
            return (
                f"messages.{index}.content.{position}: `thinking` or `redacted_thinking` blocks "
                "in the latest assistant message cannot be modified. These blocks must remain "
                "as they were in the original response."
            )
    return None


def _tool_use_ids(message: Json) -> list[str]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [block["id"] for block in content if block.get("type") == "tool_use"]


def _check_results(messages: list[Any], index: int) -> str | None:
    content = messages[index]["content"]
    asked = set(_tool_use_ids(messages[index - 1])) if index > 0 else set()
    seen_other = False
    for block in content:
        if block["type"] != "tool_result":
            seen_other = True
            continue
        if seen_other:
            return (
                f"messages.{index}: `tool_result` blocks must come before any other content "
                "in the message"
            )
        if block["tool_use_id"] not in asked:
            return (
                f"messages.{index}.content: unexpected `tool_use_id` found in `tool_result` "
                f"blocks: {block['tool_use_id']}. Each `tool_result` block must have a "
                "corresponding `tool_use` block in the previous message."
            )
    return None


def _check_uses_answered(messages: list[Any], index: int) -> str | None:
    asked = _tool_use_ids(messages[index])
    if not asked:
        return None
    following = messages[index + 1] if index + 1 < len(messages) else {}
    content = following.get("content") if isinstance(following, dict) else None
    answered = (
        {
            block.get("tool_use_id")
            for block in content
            if isinstance(block, dict) and block.get("type") == "tool_result"
        }
        if isinstance(content, list)
        else set()
    )
    missing = [call_id for call_id in asked if call_id not in answered]
    if missing:
        return (
            f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately "
            f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
            "`tool_result` block in the next message."
        )
    return None


def _check_cache_control(body: Json) -> str | None:
    count = sum(1 for block in _blocks(body) if "cache_control" in block)
    if count > 4:
        return f"A maximum of 4 blocks with cache_control may be provided. Found {count}."
    return None


def _blocks(body: Json) -> Iterator[Json]:
    for key in ("tools", "system"):
        value = body.get(key)
        if isinstance(value, list):
            yield from (block for block in value if isinstance(block, dict))
    for message in body["messages"]:
        if isinstance(message.get("content"), list):
            yield from message["content"]


# --- serving ---------------------------------------------------------------------------


def _bearer(authorization: str) -> str | None:
    scheme, _, token = authorization.partition(" ")
    return token if scheme.lower() == "bearer" and token else None


def _error_body(error_type: str, message: str) -> Json:
    return {"type": "error", "error": {"type": error_type, "message": message}}


def _message(body: Json, answer: Answer) -> Json:
    return {
        "id": f"msg_{next(_ids):06d}",
        "type": "message",
        "role": "assistant",
        "model": answer.model or body["model"],
        "content": answer.content,
        "stop_reason": answer.stop_reason,
        "stop_sequence": None,
        "usage": _usage(answer),
    }


def _usage(answer: Answer) -> Json:
    usage: Json = {
        "input_tokens": answer.input_tokens,
        "output_tokens": answer.output_tokens,
        "cache_creation_input_tokens": answer.cache_write_tokens,
        "cache_read_input_tokens": answer.cache_read_tokens,
    }
    if answer.thinking_tokens is not None:
        usage["output_tokens_details"] = {"thinking_tokens": answer.thinking_tokens}
    return usage


def _text_pieces(value: str) -> list[str]:
    return re.findall(r"\s*\S+\s*|\s+", value) or [value]


def _sse_events(body: Json, answer: Answer) -> Iterator[tuple[str, Json]]:
    """The stream the API sends for `answer`: one event per (name, data)."""
    message = _message(body, answer)
    start = dict(
        message, content=[], stop_reason=None, usage=dict(message["usage"], output_tokens=1)
    )
    yield "message_start", {"type": "message_start", "message": start}
    yield "ping", {"type": "ping"}
    for index, block in enumerate(answer.content):
        opening, deltas = _block_stream(block)
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": opening},
        )
        for delta in deltas:
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    stop: Json = {"stop_reason": answer.stop_reason, "stop_sequence": None}
    yield (
        "message_delta",
        {"type": "message_delta", "delta": stop, "usage": {"output_tokens": answer.output_tokens}},
    )
    yield "message_stop", {"type": "message_stop"}


def _block_stream(block: Json) -> tuple[Json, list[Json]]:
    """A content block as the API streams it: its opening and its deltas."""
    if block["type"] == "text":
        pieces = _text_pieces(block["text"])
        return {"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in pieces]
    if block["type"] == "thinking":
        deltas = [
            {"type": "thinking_delta", "thinking": p} for p in _text_pieces(block["thinking"])
        ]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
        return {"type": "thinking", "thinking": "", "signature": ""}, deltas
    if block["type"] == "redacted_thinking":
        return dict(block), []
    opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
    arguments = json.dumps(block["input"])
    half = len(arguments) // 2
    pieces = (arguments[:half], arguments[half:])
    return opening, [{"type": "input_json_delta", "partial_json": p} for p in pieces]


def _handler_class(server: MessagesAPIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            try:
                self._serve()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up (timeout) or we cut it

        def _serve(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            headers = {name.lower(): value for name, value in self.headers.items()}
            record = RecordedRequest("POST", self.path, headers, None, raw=raw)
            with server._lock:
                server.requests.append(record)
            try:
                record.body = json.loads(raw)
            except ValueError:
                return self._fail(record, 400, "invalid_request_error", "body: invalid JSON")
            if self.path.split("?")[0] != "/v1/messages":
                return self._fail(record, 404, "not_found_error", f"Not found: {self.path}")
            key = headers.get("x-api-key") or _bearer(headers.get("authorization", ""))
            if not key or (server.api_key is not None and key != server.api_key):
                return self._fail(record, 401, "authentication_error", "invalid API key")
            if "anthropic-version" not in headers:
                return self._fail(
                    record, 400, "invalid_request_error", "anthropic-version: header is required"
                )
            with server._lock:
                reasoning_of = dict(server.reasoning_of)
            problem = validate(record.body, reasoning_of)
            if problem:
                return self._fail(record, 400, "invalid_request_error", problem)
            item = server._next_item(record.body)
            if item is None:
                return self._fail(
                    record,
                    400,
                    "invalid_request_error",
                    "messages_api_server: no scripted reply left",
                )
            streaming = bool(record.body.get("stream"))
            if isinstance(item, Fault):
                return self._fault(record, item, streaming)
            if item.delay and server._stopping.wait(item.delay):
                return
            record.status = 200
            server._served(item)
            if streaming:
                self._stream(_sse_events(record.body, item))
            else:
                self._send_json(200, _message(record.body, item))

        def _fail(
            self,
            record: RecordedRequest,
            code: int,
            error_type: str,
            message: str,
            headers: dict[str, str] | None = None,
        ) -> None:
            record.status = code
            record.error = message
            self._send_json(code, _error_body(error_type, message), headers)

        def _fault(self, record: RecordedRequest, fault: Fault, streaming: bool) -> None:
            if fault.kind == "echo":
                headers = record.headers
                key = headers.get("x-api-key") or _bearer(headers.get("authorization", "")) or ""
                record.status = fault.status
                body = _error_body(fault.error_type, f"{fault.message}: {key}")
                body["received_key"] = key
                return self._send_json(fault.status, body, {"x-echoed-key": key})
            if fault.kind == "raw":
                record.status = fault.status
                data = fault.body.encode()
                content_type = fault.headers["content-type"]
                self._start(fault.status, content_type, {"content-length": str(len(data))})
                self.wfile.write(data)
                return self.wfile.flush()
            if fault.kind == "status" or (fault.kind == "stream_error" and not streaming):
                return self._fail(
                    record, fault.status, fault.error_type, fault.message, fault.headers
                )
            record.status = 200
            if fault.kind == "stream_error":
                first = next(_sse_events(record.body, text("never sent")))
                self._stream(iter([first, ("error", _error_body(fault.error_type, fault.message))]))
                return
            record.error = f"reply cut short ({fault.kind})"
            if streaming:
                first_events = itertools.islice(_sse_events(record.body, text("cut off here")), 4)
                self._stream(first_events, cut=fault.kind == "drop")
            else:
                data = json.dumps(_message(record.body, text("cut off here"))).encode()
                self._start(200, "application/json", {"content-length": str(len(data))})
                self.wfile.write(data[: len(data) // 2])
                self._cut()

        def _start(self, code: int, content_type: str, headers: dict[str, str]) -> None:
            self.send_response(code)
            self.send_header("content-type", content_type)
            self.send_header("request-id", f"req_{next(_ids):06d}")
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()

        def _send_json(
            self, code: int, payload: Json, headers: dict[str, str] | None = None
        ) -> None:
            data = json.dumps(payload).encode()
            self._start(
                code, "application/json", {**(headers or {}), "content-length": str(len(data))}
            )
            self.wfile.write(data)
            self.wfile.flush()

        def _stream(self, events: Iterator[tuple[str, Json]], *, cut: bool = False) -> None:
            self._start(
                200,
                "text/event-stream",
                {"transfer-encoding": "chunked", "cache-control": "no-cache"},
            )
            for name, data in events:
                chunk = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
            if cut:
                return self._cut()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _cut(self) -> None:
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

    return Handler
