"""LangChain's messages and thena_nb's records, both ways, for the LangGraph step.

- `to_langchain`: the run's history as the graph's `messages` (the step's own turns as its
  `AIMessage`s and `ToolMessage`s, other agents' as attributed user text).
- `reply_of` / `message_of`: a chat model's `AIMessage` as a `Reply`, and a recorded reply as
  the `AIMessage` the model gave (served instead of a model call).
- `canonical`: what a message says, without per-run values (message ids, `usage_metadata`,
  `response_metadata`, `additional_kwargs`, names), for the request key: LangChain stamps a
  fresh id on every answer and a served answer's usage differs from a live one's, so a key
  that held them would make every replay go live.
- `specs_of`: the tools a chat model was bound to, in whichever format its `bind_tools`
  wrote them, as `ToolSpec`s.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.utils.function_calling import convert_to_openai_tool

from thena_nb.core.records._text import to_text
from thena_nb.core.records.model import Reply, ToolSpec
from thena_nb.core.records.types import Message, ToolCall

__all__ = [
    "canonical",
    "message_of",
    "output_of",
    "reply_of",
    "specs_of",
    "stable",
    "system_of",
    "text_of",
    "to_langchain",
]

_THINKING = frozenset({"thinking", "reasoning"})
"""Content blocks that hold a model's reasoning, apart from its answer."""


def text_of(content: Any) -> str:
    """A message's content as text: its text blocks joined (no reasoning, images or calls)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type", "text") == "text":
                parts.append(str(block.get("text", "")))
        return "".join(parts)
    return to_text(content)


def _reasoning_of(content: Any) -> str | None:
    if not isinstance(content, list):
        return None
    found = [
        str(block.get("thinking") or block.get("reasoning") or block.get("text") or "")
        for block in content
        if isinstance(block, dict) and block.get("type") in _THINKING
    ]
    return "\n\n".join(found) if found else None


def _arguments(call: ToolCall) -> dict[str, Any]:
    """The model's own arguments of a call (a gate's edit is applied when the tool runs)."""
    return dict(call.original_arguments if call.original_arguments is not None else call.arguments)


def _lc_call(call: ToolCall) -> dict[str, Any]:
    return {"name": call.name, "args": _arguments(call), "id": call.id, "type": "tool_call"}


def to_langchain(history: Sequence[Message], me: str) -> list[BaseMessage]:
    """The run's history as LangChain messages for the step `me`: its own turns as its
    `AIMessage`s and `ToolMessage`s, everything else as user text (other agents'
    attributed)."""
    out: list[BaseMessage] = []
    names: dict[str, str] = {}
    for m in history:
        if m.role == "assistant" and m.agent == me:
            names.update((c.id, c.name) for c in m.tool_calls)
            out.append(AIMessage(content=m.content, tool_calls=[_lc_call(c) for c in m.tool_calls]))
        elif m.role == "tool" and m.agent == me and m.tool_call_id in names:
            call_id = m.tool_call_id
            status = "error" if m.is_error else "success"
            out.append(
                ToolMessage(m.content, tool_call_id=call_id, name=names[call_id], status=status)
            )
        elif m.role == "user":
            out.append(HumanMessage(m.content))
        elif m.role == "assistant" and m.content:
            out.append(HumanMessage(f"[{m.agent}] {m.content}"))
        elif m.role == "tool":
            out.append(HumanMessage(f"[{m.agent}] tool result: {m.content}"))
    return out


def system_of(messages: Iterable[BaseMessage]) -> str:
    """The system prompts a chat model is sent, joined."""
    return "\n\n".join(
        t for m in messages if isinstance(m, SystemMessage) if (t := text_of(m.content))
    )


def canonical(message: BaseMessage) -> tuple[Any, ...] | None:
    """What `message` says, without per-run values; `None` for a system prompt (which is
    the turn's `system`)."""
    if isinstance(message, SystemMessage):
        return None
    if isinstance(message, AIMessage):
        calls = tuple(
            (c.get("id"), c["name"], json.dumps(c.get("args"), sort_keys=True, default=str))
            for c in message.tool_calls
        )
        return ("ai", text_of(message.content), calls)
    if isinstance(message, ToolMessage):
        return ("tool", message.tool_call_id, text_of(message.content), message.status)
    return (message.type, text_of(message.content))


def stable(value: Any) -> Any:
    """`value` with only what is the same in every run: plain values, and a type's name for
    any other object (a client, a callback)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), stable(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(stable(v) for v in value)
    return type(value).__qualname__


def _spec(tool: Any) -> ToolSpec:
    if isinstance(tool, Mapping):
        function = tool.get("function")
        if tool.get("type") == "function" and isinstance(function, Mapping):
            tool = function
        if "name" in tool:
            schema = tool.get("parameters") or tool.get("input_schema")
            return ToolSpec(
                name=str(tool["name"]),
                description=str(tool.get("description") or ""),
                parameters=dict(schema) if isinstance(schema, Mapping) else {},
            )
        return ToolSpec(name=str(tool.get("type", "tool")), parameters={})  # a provider's own
    return _spec(convert_to_openai_tool(tool))


def specs_of(tools: Any) -> list[ToolSpec]:
    """The tools a chat model was bound to (`bind_tools`: OpenAI's format, Anthropic's, or
    LangChain tools) as `ToolSpec`s."""
    if not isinstance(tools, list | tuple):
        return []
    return [_spec(t) for t in tools]


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def reply_of(message: BaseMessage) -> Reply:
    """A chat model's answer as thena_nb's `Reply`: its text, calls, reasoning, token counts
    (`usage_metadata`) and what the provider said of it (`response_metadata`)."""
    calls = []
    if isinstance(message, AIMessage):
        calls = [
            ToolCall(id=str(c.get("id") or ""), name=c["name"], arguments=dict(c.get("args") or {}))
            for c in message.tool_calls
        ]
    usage: Mapping[str, Any] = getattr(message, "usage_metadata", None) or {}
    given: Mapping[str, Any] = usage.get("input_token_details") or {}
    made: Mapping[str, Any] = usage.get("output_token_details") or {}
    meta = message.response_metadata or {}
    finish = meta.get("finish_reason") or meta.get("stop_reason")
    model = meta.get("model_name") or meta.get("model")
    answer_id = meta.get("id")
    return Reply(
        text=text_of(message.content),
        tool_calls=calls,
        finish_reason=str(finish) if finish else ("tool_calls" if calls else "stop"),
        input_tokens=_count(usage.get("input_tokens")),
        output_tokens=_count(usage.get("output_tokens")),
        cache_read_tokens=_count(given.get("cache_read")),
        cache_write_tokens=_count(given.get("cache_creation")),
        reasoning=_reasoning_of(message.content),
        reasoning_tokens=_count(made.get("reasoning")),
        response_model=model if isinstance(model, str) else None,
        response_id=answer_id if isinstance(answer_id, str) else None,
    )


def message_of(reply: Reply, calls: Sequence[ToolCall], model: str) -> AIMessage:
    """A recorded reply as the `AIMessage` the model gave: its text, its calls with their
    ids and the model's own arguments, its token counts."""
    total = reply.input_tokens + reply.output_tokens
    return AIMessage(
        content=reply.text,
        tool_calls=[_lc_call(c) for c in calls],
        usage_metadata={
            "input_tokens": reply.input_tokens,
            "output_tokens": reply.output_tokens,
            "total_tokens": total,
        },
        response_metadata={
            "model_name": reply.response_model or model,
            "finish_reason": reply.finish_reason,
        },
    )


def output_of(state: Any) -> Any:
    """The graph's output as the step's: a `structured_response` (`create_agent` with a
    `response_format`), else the text of its last message."""
    if not isinstance(state, Mapping):
        return None
    structured = state.get("structured_response")
    if structured is not None:
        return structured
    messages = state.get("messages") or []
    if messages and isinstance(messages[-1], BaseMessage):
        return text_of(messages[-1].content)
    return None
