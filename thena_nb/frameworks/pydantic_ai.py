"""A pydantic-ai `Agent` as a thena_nb step, held through a per-run capability.

The step runs `agent.run(...)` with one more capability of its own (`_Hooks`), passed for
that run only, so the user's agent is never changed:

- `wrap_model_request`: each model request is a turn (`TurnPort.model_call`). Live, the
  framework's own handler calls the model; served (replay, a fork's prefix, a resume), the
  recorded reply is made into the `ModelResponse` the model gave, with its model name and
  usage, and the handler is not called.
- `wrap_tool_validate`: a gate's edited arguments replace the model's before pydantic-ai
  validates them; arguments that fail validation are a failed call.
- `wrap_tool_execute`: a recorded result, a rejection or a response is given without running
  the tool (`ToolFailed` for a failure: the model sees it, no retry is spent); a live call's
  result, or its `ModelRetry`/exception, is reported (`after_tool`).

The run's history becomes the agent's `message_history` (its own earlier turns as its
responses and tool returns, other agents' as attributed user text), and each model call's
messages join the run's history, so the steps after it read them.

The request key covers what pydantic-ai sends besides thena_nb's history: its messages as
text, calls and results (no timestamps, run ids, provider response ids or usage), its
instructions, tools, output tools and model settings.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterable, Sequence
from typing import Any, Literal

from pydantic_ai import Agent as _PydanticAgent
from pydantic_ai import DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ToolFailed, ToolRetryError
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    ModelResponsePart,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.usage import RequestUsage

from thena_nb.core.engine.foreign import (
    ForeignAgent,
    ForeignRequest,
    GateSpec,
    Serve,
    TurnPort,
    _Live,
)
from thena_nb.core.records._keys import blake
from thena_nb.core.records._text import to_text
from thena_nb.core.records.model import ModelRequest as ThenaRequest
from thena_nb.core.records.model import Reply, ToolSpec
from thena_nb.core.records.types import Message, ToolCall

__all__ = ["PydanticAIStep", "is_agent"]

_OFFLINE = frozenset({"function", "test"})
"""pydantic-ai's offline models' `system`: billed by no one."""


def is_agent(obj: Any) -> bool:
    """Whether `obj` is a pydantic-ai agent."""
    return isinstance(obj, _PydanticAgent)


class PydanticAIStep(ForeignAgent):
    """A pydantic-ai `Agent` as a step: its whole run, one turn per model request.

    Example:
        >>> from pydantic_ai import Agent as PydanticAgent
        >>> from pydantic_ai.models.test import TestModel
        >>> from thena_nb import Workflow
        >>> forecaster = PydanticAgent(TestModel(custom_output_text="Sunny."), name="Forecaster")
        >>> wf = Workflow.of(forecaster)
        >>> run = wf.run("Weather in Lisbon?", store=False)
        >>> run.output, run.turns[0].agent, run.turns[0].model
        ('Sunny.', 'Forecaster', 'test')
    """

    framework = "pydantic-ai"

    def __init__(
        self,
        agent: Any,
        *,
        name: str | None = None,
        gate: GateSpec = None,
        overrides: dict[str, Any] | None = None,
    ) -> None:
        overrides = dict(overrides or {})
        step_name = self.step_name(agent, name, overrides)
        self.overrides = overrides
        model = overrides.get("model", agent.model)
        super().__init__(step_name, target=agent, model=_model_of(model), gate=gate)

    async def drive(self, port: TurnPort) -> Any:
        messages = to_pydantic(port.history, self.name)
        changes = {k: v for k, v in self.overrides.items() if k != "name"}
        if "system" in changes:
            changes["instructions"] = changes.pop("system")
        hooks = _Hooks(port, self)
        model = changes.get("model", self.target.model)
        stream = hooks.stream if port.streaming and _streams(model) else None
        with self.target.override(**changes) if changes else contextlib.nullcontext():
            result = await self.target.run(
                message_history=messages,
                deps=port.deps,
                capabilities=[hooks],
                event_stream_handler=stream,
            )
        for message in result.new_messages()[-1:]:  # output tools' returns, which run no tool
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if isinstance(part, ToolReturnPart):
                        port.after_tool(part.tool_call_id, result=part.model_response_str())
        return result.output

    def wire(self, request: ThenaRequest) -> dict[str, Any]:
        """A turn's request as pydantic-ai's own records: its instructions, its messages
        (`ModelMessagesTypeAdapter` JSON) and its tools."""
        messages = to_pydantic(request.messages, self.name)
        return {
            "instructions": request.system,
            "messages": ModelMessagesTypeAdapter.dump_python(messages, mode="json"),
            "tools": [spec.model_dump(mode="json") for spec in request.tools],
        }

    def configuration(self) -> Any:
        agent = self.target
        model = self.overrides.get("model", agent.model)
        return (
            _model_description(model),
            self.overrides.get("instructions", self.overrides.get("system")),
            [_described(i) for i in getattr(agent, "_instructions", ())],
            _described(getattr(agent, "_system_prompts", ())),
            [(t.name, t.description, t.function) for t in agent._function_toolset.tools.values()],
            repr(agent.output_type),
            self.overrides.get("model_settings", agent.model_settings),
        )


def _streams(model: Any) -> bool:
    """Whether the model can stream: all of pydantic-ai's can, but a `FunctionModel` without
    a `stream_function`."""
    return not (isinstance(model, FunctionModel) and model.stream_function is None)


def _described(value: Any) -> Any:
    """An instruction or a system prompt as fingerprints see it: text, or its function."""
    if isinstance(value, (list, tuple)):
        return [_described(v) for v in value]
    return getattr(value, "function", value)


def _model_description(model: Any) -> Any:
    if model is None or isinstance(model, str):
        return model
    inner = getattr(model, "function", None)
    return (type(model).__qualname__, getattr(model, "model_name", ""), inner)


def _model_of(model: Any) -> _Live:
    """The step's model as thena_nb names and prices it."""
    if model is None:
        return _Live("", False)
    if isinstance(model, str):
        provider, _, name = model.partition(":")
        return _Live(name or provider, provider if name else False)
    system = getattr(model, "system", "")
    priced: str | bool = False if system in _OFFLINE or not system else system
    return _Live(getattr(model, "model_name", "") or "", priced)


class _Hooks(AbstractCapability[Any]):
    """The step's capability for one run: every model request and tool call to the port."""

    def __init__(self, port: TurnPort, step: PydanticAIStep) -> None:
        self.port = port
        self.step = step
        self._folded: list[ModelMessage] = []
        """The messages `_said` has folded into `_hash`, in order (a run's requests grow by
        the messages of a turn each, as the same objects)."""
        self._hash = blake()

    def _said(self, messages: Sequence[ModelMessage]) -> str:
        """The digest of `canonical(messages)`, folding in only the messages new since the
        last request when it starts with the same message objects (else from scratch), so a
        request's key costs what is new, not the whole history."""
        folded = self._folded
        n = len(folded)
        if len(messages) < n or any(messages[i] is not folded[i] for i in range(n)):
            self._folded, self._hash, n = [], blake(), 0
            folded = self._folded
        for message in messages[n:]:
            self._hash.update(repr(canonical([message])).encode())
            folded.append(message)
        return str(self._hash.hexdigest())

    async def stream(self, ctx: Any, events: AsyncIterable[Any]) -> None:
        """The run's events as they come (it streams when someone listens): its text, to the
        port as it arrives."""
        async for ev in events:
            if isinstance(ev, PartStartEvent) and isinstance(ev.part, TextPart):
                self.port.text_delta(ev.part.content)
            elif isinstance(ev, PartDeltaEvent) and isinstance(ev.delta, TextPartDelta):
                self.port.text_delta(ev.delta.content_delta)

    async def wrap_model_request(self, ctx: Any, *, request_context: Any, handler: Any) -> Any:
        params = request_context.model_request_parameters
        settings = request_context.model_settings
        got: dict[str, ModelResponse] = {}

        async def live() -> Reply:
            response = await handler(request_context)
            got["response"] = response
            return reply_of(response)

        model = request_context.model
        asked = ForeignRequest(
            system=_system(params, request_context.messages),
            tools=[_spec(t) for t in [*params.function_tools, *params.output_tools]],
            canonical=(
                self._said(request_context.messages),
                [t.name for t in params.output_tools],
                repr(getattr(params, "output_mode", None)),
                repr(sorted((settings or {}).items())),
            ),
            live=live,
            model=getattr(model, "model_name", "") or "",
            max_tokens=int((settings or {}).get("max_tokens") or 0),
            held=frozenset(t.name for t in params.function_tools if t.kind == "unapproved"),
        )
        reply, proposed, served = await self.port.model_call(asked)
        if not served and "response" in got:
            return got["response"]
        return response_of(reply, proposed, asked.model)

    async def handle_deferred_tool_calls(self, ctx: Any, *, requests: Any) -> Any:
        """pydantic-ai's own approvals (`requires_approval`) answered by the gates'
        decisions, which the turn took before its tools (live or as recorded)."""
        approvals: dict[str, Any] = {}
        for part in requests.approvals:
            call = self.port.decision_of(part.tool_call_id)
            if call is None or call.decision is None:
                continue
            if call.decision == "approve":
                approvals[part.tool_call_id] = ToolApproved()
            elif call.decision == "edit":
                approvals[part.tool_call_id] = ToolApproved(override_args=dict(call.arguments))
            else:  # rejected, or answered by the person: the model reads that instead
                said = call.error if call.decision == "reject" else call.result
                approvals[part.tool_call_id] = ToolDenied(said or "")
        return DeferredToolResults(approvals=approvals) if approvals else None

    async def wrap_tool_validate(
        self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any
    ) -> Any:
        found = self.port.before_tool_arguments(call.tool_call_id)
        if found is not None:
            args = found
        try:
            return await handler(args)
        except ToolRetryError as exc:
            self.port.after_tool(call.tool_call_id, error=exc, message=_retry_text(exc))
            raise

    async def wrap_tool_execute(
        self, ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any
    ) -> Any:
        call_id = call.tool_call_id
        got = self.port.before_tool(call_id)
        if got is None:
            return await handler(args)
        if isinstance(got, Serve):
            if got.ok:
                return got.text
            raise ToolFailed(got.text)
        try:
            value = await handler(args)
        except ToolRetryError as exc:
            self.port.after_tool(call_id, error=exc, message=_retry_text(exc))
            raise
        except Exception as exc:
            self.port.after_tool(call_id, error=exc)
            raise
        self.port.after_tool(call_id, result=value)
        return value


def _retry_text(exc: ToolRetryError) -> str:
    part = exc.tool_retry
    content = getattr(part, "content", None)
    return content if isinstance(content, str) else to_text(content)


def _spec(tool: Any) -> ToolSpec:
    return ToolSpec(
        name=tool.name,
        description=tool.description or "",
        parameters=dict(tool.parameters_json_schema),
    )


def _system(params: Any, messages: Sequence[ModelMessage]) -> str:
    """The instructions and system prompts the model is sent, joined."""
    texts = [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if part.part_kind == "system-prompt"
    ]
    texts += [p.content for p in getattr(params, "instruction_parts", None) or ()]
    return "\n\n".join(t for t in texts if t)


# -- records both ways ---------------------------------------------------------------------


def reply_of(response: ModelResponse) -> Reply:
    """pydantic-ai's `ModelResponse` as thena_nb's `Reply`."""
    texts, thoughts, calls = [], [], []
    for part in response.parts:
        if isinstance(part, TextPart):
            texts.append(part.content)
        elif isinstance(part, ThinkingPart):
            thoughts.append(part.content)
        elif isinstance(part, ToolCallPart):
            calls.append(
                ToolCall(id=part.tool_call_id, name=part.tool_name, arguments=part.args_as_dict())
            )
    usage = response.usage
    return Reply(
        text="".join(texts),
        tool_calls=calls,
        finish_reason=response.finish_reason,
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        cache_read_tokens=usage.cache_read_tokens or 0,
        cache_write_tokens=usage.cache_write_tokens or 0,
        reasoning="\n\n".join(thoughts) if thoughts else None,
        response_model=response.model_name,
        response_id=response.provider_response_id,
    )


def response_of(reply: Reply, calls: Sequence[ToolCall], model_name: str) -> ModelResponse:
    """A recorded reply as the `ModelResponse` the model gave, with its model name and
    usage (pydantic-ai reads both)."""
    parts: list[ModelResponsePart] = []
    if reply.reasoning:
        parts.append(ThinkingPart(content=reply.reasoning))
    if reply.text:
        parts.append(TextPart(content=reply.text))
    for call in calls:
        arguments = call.original_arguments if call.original_arguments is not None else None
        parts.append(ToolCallPart(call.name, arguments or call.arguments, tool_call_id=call.id))
    usage = RequestUsage(
        input_tokens=reply.input_tokens,
        output_tokens=reply.output_tokens,
        cache_read_tokens=reply.cache_read_tokens,
        cache_write_tokens=reply.cache_write_tokens,
    )
    finish = reply.finish_reason if reply.finish_reason in _FINISH else None
    return ModelResponse(parts=parts, usage=usage, model_name=model_name, finish_reason=finish)  # type: ignore[arg-type]


_FINISH = ("stop", "length", "content_filter", "tool_call", "error")


def canonical(messages: Sequence[ModelMessage]) -> tuple[Any, ...]:
    """What the messages say, without per-run values: each part's kind, text, calls and
    results (a result as the text the model reads; failed or retried as one)."""
    out: list[Any] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
            calls = [
                (p.tool_call_id, p.tool_name, json.dumps(p.args_as_dict(), sort_keys=True))
                for p in message.parts
                if isinstance(p, ToolCallPart)
            ]
            out.append(("assistant", text, tuple(calls)))
            continue
        for part in message.parts:
            kind = part.part_kind
            if isinstance(part, ToolReturnPart):
                ok = getattr(part, "outcome", "success") == "success"
                out.append(("tool", part.tool_call_id, part.tool_name, _text(part.content), ok))
            elif isinstance(part, UserPromptPart):
                out.append(("user", _text(part.content)))
            elif kind == "system-prompt":
                continue  # in the request's system text
            else:
                out.append((kind, _text(getattr(part, "content", ""))))
    return tuple(out)


def _text(content: Any) -> str:
    return content if isinstance(content, str) else to_text(content)


def to_pydantic(history: Sequence[Message], me: str) -> list[ModelMessage]:
    """The run's history as pydantic-ai messages for agent `me`: its own turns as its
    responses and tool returns, everything else as user text (other agents' attributed)."""
    out: list[ModelMessage] = []
    parts: list[Any] = []
    names: dict[str, str] = {}
    for m in history:
        if m.role == "assistant" and m.agent == me:
            if parts:
                out.append(ModelRequest(parts=parts))
                parts = []
            response: list[ModelResponsePart] = [TextPart(m.content)] if m.content else []
            for c in m.tool_calls:
                names[c.id] = c.name
                response.append(ToolCallPart(c.name, c.arguments, tool_call_id=c.id))
            if response:
                out.append(ModelResponse(parts=response))
        elif m.role == "tool" and m.agent == me and m.tool_call_id in names:
            outcome: Literal["failed", "success"] = "failed" if m.is_error else "success"
            parts.append(
                ToolReturnPart(
                    names[m.tool_call_id], m.content, tool_call_id=m.tool_call_id, outcome=outcome
                )
            )
        elif m.role == "user":
            parts.append(UserPromptPart(m.content))
        elif m.role == "assistant" and m.content:
            parts.append(UserPromptPart(f"[{m.agent}] {m.content}"))
        elif m.role == "tool":
            parts.append(UserPromptPart(f"[{m.agent}] tool result: {m.content}"))
    if parts:
        out.append(ModelRequest(parts=parts))
    return out
