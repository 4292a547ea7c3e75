"""smolagents' records and thena_nb's, both ways: the run's history as an agent's memory,
a `ChatMessage` as a `Reply` and back, the messages a request sends without per-run values,
and a smolagents tool as a `ToolSpec`. Used by `thena_nb/frameworks/smolagents.py` only."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from smolagents.memory import ActionStep, MemoryStep, TaskStep
from smolagents.memory import ToolCall as SmolCall
from smolagents.models import (
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    get_tool_json_schema,
    parse_json_if_needed,
)
from smolagents.monitoring import AgentLogger, LogLevel, Timing, TokenUsage
from smolagents.utils import AgentToolExecutionError

from thena_nb.core.records.model import Reply, ToolSpec
from thena_nb.core.records.types import Message, ToolCall

__all__ = [
    "CODE_TOOL",
    "CONTINUE",
    "canonical",
    "code_spec",
    "message_of",
    "reply_of",
    "spec_of",
    "text_of",
    "to_memory",
]

CODE_TOOL = "python_interpreter"
"""The call a `CodeAgent` turn shows for the code it ran (smolagents' own name for it)."""

CONTINUE = "Continue."
"""The task when the history ends with the agent's own turn (a loop around the step)."""

_QUIET = AgentLogger(level=LogLevel.OFF)
"""For the errors rebuilt from the history: smolagents' `AgentError` logs when it is made."""

_JSON_TYPES = frozenset({"string", "integer", "number", "boolean", "object", "array", "null"})


def text_of(content: Any) -> str:
    """A message's content as text: a string, or its text parts joined (images as a mark)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content:
        if isinstance(part, dict):
            kind = part.get("type")
            parts.append(str(part.get("text", "")) if kind == "text" else f"[{kind}]")
        else:
            parts.append(str(part))
    return "".join(parts)


def _role(message: Any) -> str:
    role = message.get("role") if isinstance(message, dict) else message.role
    return str(role.value if isinstance(role, MessageRole) else role)


def _calls_shown(message: Any) -> tuple[Any, ...]:
    calls = (message.get("tool_calls") if isinstance(message, dict) else message.tool_calls) or ()
    out = []
    for c in calls:
        function = c.function if isinstance(c, ChatMessageToolCall) else c.get("function", {})
        name = function.name if isinstance(function, ChatMessageToolCallFunction) else ""
        arguments = function.arguments if name else function.get("arguments")
        name = name or function.get("name", "")
        call_id = c.id if isinstance(c, ChatMessageToolCall) else c.get("id")
        out.append((call_id, name, json.dumps(parse_json_if_needed(arguments), sort_keys=True)))
    return tuple(out)


def canonical(messages: Sequence[Any]) -> tuple[Any, ...]:
    """What the messages say (role, text, calls), the system message left out: it is the
    request's `system`. smolagents' messages carry no timestamps or ids of their own."""
    out: list[Any] = []
    for m in messages:
        role = _role(m)
        if role == "system":
            continue
        content = m.get("content") if isinstance(m, dict) else m.content
        out.append((role, text_of(content), _calls_shown(m)))
    return tuple(out)


def system_of(messages: Sequence[Any]) -> str:
    """The text of the request's system messages."""
    texts = [
        text_of(m.get("content") if isinstance(m, dict) else m.content)
        for m in messages
        if _role(m) == "system"
    ]
    return "\n\n".join(t for t in texts if t)


def spec_of(tool: Any) -> ToolSpec:
    """A smolagents tool (or managed agent) as the `ToolSpec` the model is offered, its
    schema made plain JSON schema (`nullable` as a `null` type, smolagents' own types left
    open)."""
    function = get_tool_json_schema(tool)["function"]
    parameters = dict(function["parameters"])
    properties = {}
    for key, value in parameters.get("properties", {}).items():
        prop = {k: v for k, v in value.items() if k != "nullable"}
        kinds = prop.get("type")
        kinds = list(kinds) if isinstance(kinds, list) else [kinds]
        if any(k not in _JSON_TYPES for k in kinds):
            prop.pop("type", None)  # image, audio, any: smolagents checks those itself
        elif value.get("nullable"):
            prop["type"] = [*kinds, "null"] if "null" not in kinds else kinds
        properties[key] = prop
    parameters["properties"] = properties
    return ToolSpec(
        name=str(function["name"]),
        description=str(function.get("description") or ""),
        parameters=parameters,
    )


def code_spec() -> ToolSpec:
    """The call a `CodeAgent` turn shows: the code it wrote, run by its executor."""
    return ToolSpec(
        name=CODE_TOOL,
        description="Python code the agent wrote, run by its executor; the result is what "
        "the agent read back (execution logs and the last output).",
        parameters={
            "type": "object",
            "properties": {"code": {"type": "string"}},
            "required": ["code"],
        },
    )


def reply_of(message: ChatMessage, calls: Sequence[ToolCall]) -> Reply:
    """The model's `ChatMessage` as thena_nb's `Reply`, with the calls found in it."""
    usage = message.token_usage
    return Reply(
        text=text_of(message.content),
        tool_calls=list(calls),
        finish_reason="tool_calls" if calls else "stop",
        input_tokens=usage.input_tokens if usage else 0,
        output_tokens=usage.output_tokens if usage else 0,
    )


def native_calls(message: ChatMessage) -> list[ToolCall]:
    """The calls that came through the API's tool channel."""
    out = []
    for c in message.tool_calls or ():
        arguments = parse_json_if_needed(c.function.arguments)
        if not isinstance(arguments, dict):
            arguments = {"input": arguments}
        out.append(ToolCall(id=str(c.id), name=c.function.name, arguments=arguments))
    return out


def message_of(reply: Reply, calls: Sequence[ToolCall], *, code: bool) -> ChatMessage:
    """A recorded reply as the `ChatMessage` the model gave: its text, its calls (with the
    model's own arguments and ids; none for a `CodeAgent`, whose code is in the text) and
    its usage."""
    tool_calls = None
    if not code and calls:
        tool_calls = []
        for call in calls:
            arguments = call.original_arguments or call.arguments
            if set(arguments) == {"input"} and call.source == "rescued":
                arguments = arguments["input"]
            function = ChatMessageToolCallFunction(name=call.name, arguments=arguments)
            tool_calls.append(ChatMessageToolCall(function=function, id=call.id, type="function"))
    return ChatMessage(
        role=MessageRole.ASSISTANT,
        content=reply.text or None,
        tool_calls=tool_calls,
        token_usage=TokenUsage(input_tokens=reply.input_tokens, output_tokens=reply.output_tokens),
    )


def to_memory(
    history: Sequence[Message], me: str, *, code: bool
) -> tuple[list[MemoryStep], str | None]:
    """The run's history as agent `me`'s memory steps and the task to run: its own turns as
    its action steps (their calls and observations), everything else as task text (other
    agents' attributed); the last such text is the task, `None` when the history ends with
    the agent's own turn."""
    steps: list[MemoryStep] = []
    chunk: list[str] = []
    own: dict[str, ActionStep] = {}

    def flush() -> None:
        if chunk:
            steps.append(TaskStep(task="\n\n".join(chunk)))
            chunk.clear()

    for m in history:
        if m.role == "assistant" and m.agent == me:
            flush()
            calls = [
                SmolCall(
                    name=c.name,
                    arguments=c.arguments.get("code", "") if code else c.arguments,
                    id=c.id,
                )
                for c in m.tool_calls
            ]
            step = ActionStep(
                step_number=sum(isinstance(s, ActionStep) for s in steps) + 1,
                timing=Timing(start_time=0.0, end_time=0.0),
                tool_calls=calls or None,
                model_output=m.content or None,
                model_output_message=ChatMessage(role=MessageRole.ASSISTANT, content=m.content),
            )
            steps.append(step)
            own.update({c.id: step for c in m.tool_calls})
        elif m.role == "tool" and m.agent == me and m.tool_call_id in own:
            step = own[m.tool_call_id]
            if m.is_error:
                step.error = AgentToolExecutionError(m.content, _QUIET)
            else:
                step.observations = "\n".join(filter(None, [step.observations, m.content]))
        elif m.role == "user":
            chunk.append(m.content)
        elif m.role == "assistant" and m.content:
            chunk.append(f"[{m.agent}] {m.content}")
        elif m.role == "tool":
            chunk.append(f"[{m.agent}] tool result: {m.content}")
    return steps, "\n\n".join(chunk) if chunk else None
