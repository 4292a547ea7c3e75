"""Attribute values for the spans: the model's provider and server, and content as JSON.

Names follow the OpenTelemetry GenAI semantic conventions as of semantic-conventions
v1.41.0 (`SEMCONV_VERSION`); messages follow that version's input/output message schemas:
`{"role", "parts": [...], "finish_reason"?}` with `text`, `tool_call`,
`tool_call_response` and `reasoning` parts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from thena_nb.core.records.model import ModelRequest, Reply
from thena_nb.core.records.types import Message, ToolCall

__all__ = [
    "SCHEMA_URL",
    "SEMCONV_VERSION",
    "error_type",
    "input_messages",
    "output_messages",
    "provider_of",
    "server_of",
    "system_instructions",
    "tool_error_type",
]

SEMCONV_VERSION = "1.41.0"
"""The version of the OpenTelemetry semantic conventions whose GenAI names the spans use."""
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

OFFLINE_PROVIDER = "thena_nb"
"""`gen_ai.provider.name` (required) for the offline models, which no provider serves."""

_PROVIDERS = {
    "thena_nb.models.anthropic.AnthropicModel": "anthropic",
    "thena_nb.models.openai_compat.OpenAICompatModel": "openai",
}
_DEFAULT_SERVERS = {"anthropic": ("ANTHROPIC_BASE_URL", "https://api.anthropic.com")}
_FINISH = {
    "end_turn": "stop",
    "stop": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "length": "length",
    "tool_use": "tool_call",
    "tool_calls": "tool_call",
    "function_call": "tool_call",
    "content_filter": "content_filter",
    "refusal": "content_filter",
}


def provider_of(model: Any) -> str:
    """`gen_ai.provider.name` for `model`: its own `provider` attribute if it has one, else
    by its class (`anthropic`, `openai` for any OpenAI-compatible server), else `thena_nb`.

    >>> from thena_nb.models import ScriptedModel
    >>> provider_of(ScriptedModel(["hi"]))
    'thena_nb'
    """
    given = getattr(model, "provider", None)
    if isinstance(given, str) and given:
        return given
    for cls in type(model).__mro__:
        found = _PROVIDERS.get(f"{cls.__module__}.{cls.__qualname__}")
        if found is not None:
            return found
    return OFFLINE_PROVIDER


def server_of(model: Any, provider: str) -> tuple[str, int] | None:
    """`server.address` and `server.port` from the model's `base_url` (the provider's
    default endpoint when it has none); `None` for a model that talks to no server.

    Only the host and port are taken: credentials in a URL never reach a span.

    >>> class Local:
    ...     base_url = "http://user:secret@localhost:11434/v1"
    >>> server_of(Local(), "openai")
    ('localhost', 11434)
    """
    url = getattr(model, "base_url", None)
    if not isinstance(url, str) or not url:
        default = _DEFAULT_SERVERS.get(provider)
        if default is None:
            return None
        url = os.environ.get(default[0]) or default[1]
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.hostname is None:
        return None
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return parts.hostname, port


def error_type(exc: BaseException) -> str:
    """`error.type` of a failed call: the HTTP status when the API answered one, else the
    exception's qualified class name."""
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return str(status)
    cls = type(exc)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def tool_error_type(done: ToolCall) -> str:
    """`error.type` of a failed tool call: the exception class its traceback ends with, or
    `tool_error` (the error MCP's conventions give a tool that reported a failure)."""
    if done.traceback:
        last = done.traceback.strip().splitlines()[-1]
        name = last.split(":", 1)[0].strip()
        if name and " " not in name:
            return name
    return "tool_error"


def finish_reason(raw: str | None) -> str:
    """The output schema's finish reason for an adapter's raw one."""
    return _FINISH.get(raw or "", "stop")


def system_instructions(sent: ModelRequest) -> str | None:
    """`gen_ai.system_instructions` as JSON parts, or `None` without a system prompt."""
    if not sent.system:
        return None
    return _dump([{"type": "text", "content": sent.system}])


def input_messages(messages: Iterable[Message]) -> str:
    """`gen_ai.input.messages`: the history the model was sent, as JSON."""
    return _dump([_message(m) for m in messages])


def output_messages(reply: Reply, finish: str | None) -> str:
    """`gen_ai.output.messages`: the model's one message, as JSON."""
    parts: list[dict[str, Any]] = []
    if reply.reasoning:
        parts.append({"type": "reasoning", "content": reply.reasoning})
    if reply.text:
        parts.append({"type": "text", "content": reply.text})
    parts.extend(_call_part(c) for c in reply.tool_calls)
    out = {"role": "assistant", "parts": parts, "finish_reason": finish_reason(finish)}
    return _dump([out])


def _message(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        part = {"type": "tool_call_response", "id": m.tool_call_id, "response": m.content}
        return {"role": "tool", "parts": [part]}
    parts: list[dict[str, Any]] = []
    if m.content:
        parts.append({"type": "text", "content": m.content})
    parts.extend(_call_part(c) for c in m.tool_calls)
    return {"role": m.role, "parts": parts}


def _call_part(call: ToolCall) -> dict[str, Any]:
    return {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def dump_arguments(arguments: dict[str, Any]) -> str:
    """`gen_ai.tool.call.arguments` as a JSON string."""
    return _dump(arguments)
