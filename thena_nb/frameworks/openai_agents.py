"""An OpenAI Agents SDK `Agent` as a thena_nb step, held through a per-run copy of the agent.

The step runs `Runner.run(copy, items, context=deps)` on a copy of the agent (`Agent.clone`),
made for that run only, so the user's agent is never changed:

- its model is `_HeldModel`, an `agents.Model` whose `get_response` makes each model call a
  turn (`TurnPort.model_call`). Live, the agent's own model (a `Model`, or a name resolved
  by the SDK's default `MultiProvider`, as `Runner` resolves it) is called; served (replay,
  a fork's prefix, a resume), the recorded reply is made into the `ModelResponse` the model
  gave, with its calls' ids, arguments and usage, and the model is not called.
- each `FunctionTool` is a copy whose `on_invoke_tool` asks the port first: a recorded
  result, a rejection or a response is given without running the tool (a failure as the
  text the model reads); a live call runs with the arguments a gate may have edited, and
  its result is reported (`after_tool`). The SDK's `failure_error_function` still makes a
  tool's exception the text the model reads; the call is recorded as failed, with that text
  and the exception's traceback.
- a tool's `needs_approval` (true, or a policy function) makes its calls thena_nb gated
  calls (`ForeignRequest.held`), whatever `gate=` says: the person decides in the turn, before
  the tool runs (`approve=`, or a waiting run and `resume(decisions=...)`), and the copy has
  `needs_approval=False`, so the SDK does not stop its run for it. A policy function is not
  asked: every call of such a tool waits for a decision.
- handoffs run inside the step: every agent a handoff reaches runs as the same kind of copy,
  its model calls are turns of this step (named after the top agent), and each turn's
  `system` holds the instructions of the agent that answered. A handoff's call is reported
  with the SDK's transfer message when it runs; a gate's decision on it is recorded, but the
  SDK hands off whatever it says.

The run's history becomes the SDK's input items (the agent's own earlier turns as its
messages, function calls and their outputs, other agents' as attributed user text), and each
model call's messages join the run's history, so the steps after it read them.

The request key covers what the SDK sends besides thena_nb's history: its input items as
text, calls and outputs (no item ids, statuses or reasoning items), the answering agent's
name, the output schema, the handoffs, the model settings and the prompt.

Hosted tools (web search, file search, code interpreter, ...) run on OpenAI's servers and
cannot be replayed or gated: an agent that has one is refused. Tools the SDK runs on its
own (an MCP server's tools) are recorded from their outputs but not held; if the SDK stops
for an approval of one of them, the step fails and says so. The step runs the SDK
non-streamed (`Runner.run`).
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Sequence
from typing import Any

from agents import Agent as _SDKAgent
from agents import FunctionTool, Handoff, Model, ModelResponse, ModelTracing, Runner, Usage
from agents import handoff as _handoff
from agents.models.multi_provider import MultiProvider
from agents.tool import resolve_function_tool_failure_error_function
from agents.tool import set_function_tool_failure_error_function as _set_failure_function
from agents.tool_context import ToolContext
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputRefusal,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from pydantic import BaseModel

from thena_nb.core.engine.foreign import (
    ForeignAgent,
    ForeignRequest,
    GateSpec,
    Serve,
    TurnPort,
    _Live,
)
from thena_nb.core.records._text import to_text
from thena_nb.core.records.model import ModelRequest, Reply, ToolSpec
from thena_nb.core.records.types import Message, ToolCall
from thena_nb.models.openai_compat import parse_arguments

__all__ = ["AgentsSDKStep", "is_agent"]

_PER_RUN = frozenset({"id", "status", "created_at", "response_id", "logprobs", "annotations"})
"""Keys of the SDK's items that differ from run to run (or hold nothing the model reads)."""


def is_agent(obj: Any) -> bool:
    """Whether `obj` is an OpenAI Agents SDK agent."""
    return isinstance(obj, _SDKAgent)


class AgentsSDKStep(ForeignAgent):
    """An OpenAI Agents SDK `Agent` as a step: its whole run, one turn per model call.

    Handoffs run inside the step: the agents it hands off to answer as turns of this step.

    Example:
        >>> from agents import Agent as SDKAgent
        >>> from thena_nb import Workflow
        >>> step = Workflow.of(SDKAgent(name="Forecaster", model="gpt-4.1")).steps[0]
        >>> step.name, step.framework, step.model.name
        ('Forecaster', 'OpenAI Agents SDK', 'gpt-4.1')
    """

    framework = "OpenAI Agents SDK"

    def __init__(
        self,
        agent: Any,
        *,
        name: str | None = None,
        gate: GateSpec = None,
        overrides: dict[str, Any] | None = None,
    ) -> None:
        overrides = dict(overrides or {})
        if "system" in overrides:
            overrides["instructions"] = overrides.pop("system")
        step_name = self.step_name(agent, name, overrides)
        _refuse_hosted(agent)
        self.overrides = overrides
        model = overrides.get("model", agent.model)
        super().__init__(step_name, target=agent, model=_model_of(model), gate=gate)

    def agent(self) -> _SDKAgent[Any]:
        """The SDK agent this step runs: the target with the step's overrides."""
        changes = {k: v for k, v in self.overrides.items() if k != "name"}
        agent: _SDKAgent[Any] = self.target.clone(**changes) if changes else self.target
        return agent

    async def drive(self, port: TurnPort) -> Any:
        held = _Held(port)
        try:
            top = held.copy(self.agent())
            result = await Runner.run(top, to_items(port.history, self.name), context=port.deps)
            held.report_outputs(getattr(item, "raw_item", None) for item in result.new_items)
        finally:
            await held.provider.aclose()
        stopped = getattr(result, "interruptions", None)
        if stopped:  # a tool the step does not hold (an MCP server's) asked for approval
            names = ", ".join(repr(getattr(i, "tool_name", None) or "?") for i in stopped)
            raise ValueError(
                f"OpenAI Agents SDK agent {self.name!r} stopped for the approval of {names}, "
                "a tool the SDK runs on its own, which a thena_nb step cannot answer; give the "
                "step function tools for the calls a person decides (`needs_approval`, or "
                "`Workflow.of(agent, gate=[...])`)"
            )
        return result.final_output

    def wire(self, request: ModelRequest) -> dict[str, Any]:
        """A turn's request as the SDK's own: its instructions, its input items (as JSON)
        and its tools."""
        return {
            "instructions": request.system,
            "input": json.loads(json.dumps(to_items(request.messages, self.name))),
            "tools": [spec.model_dump(mode="json") for spec in request.tools],
        }

    def configuration(self) -> Any:
        agent = self.agent()
        return (
            _model_description(agent.model),
            agent.model_settings.to_json_dict(),
            agent.instructions,  # text, or the function that makes it
            [_tool_description(t) for t in agent.tools],
            [getattr(h, "name", None) or getattr(h, "agent_name", "") for h in agent.handoffs],
            repr(agent.output_type),
        )


def _refuse_hosted(agent: Any) -> None:
    """Refuse an agent with tools that run on OpenAI's servers: they replay nothing."""
    hosted = [t for t in agent.tools if not isinstance(t, FunctionTool)]
    if hosted:
        names = ", ".join(f"{type(t).__name__} {getattr(t, 'name', '')!r}" for t in hosted)
        raise ValueError(
            f"OpenAI Agents SDK agent {agent.name!r} has hosted tools ({names}); they run on "
            "OpenAI's servers, where thena_nb can neither replay nor gate them. Give the step "
            "function tools only (`@function_tool`)."
        )


def _tool_description(tool: Any) -> Any:
    try:
        function: Any = tool.__wrapped__  # the decorated Python function, when there is one
    except AttributeError:
        function = None
    return (tool.name, tool.description, function or json.dumps(tool.params_json_schema))


def _model_description(model: Any) -> Any:
    if model is None or isinstance(model, str):
        return model
    return (type(model).__qualname__, _model_name(model))


def _model_name(model: Any) -> str:
    """A `Model`'s name: the SDK's OpenAI models keep it as `model`."""
    name = getattr(model, "model", None)
    return name if isinstance(name, str) else type(model).__name__


def _model_of(model: Any) -> _Live:
    """The step's model as thena_nb names and prices it: a name is OpenAI's (the SDK's
    default provider) unless it names another provider (`litellm/...`)."""
    if model is None:
        return _Live("", False)
    if isinstance(model, str):
        prefix, _, rest = model.partition("/")
        if rest and prefix != "openai":
            return _Live(rest, False)
        return _Live(rest or model, "openai")
    return _Live(_model_name(model), False)


class _Held:
    """One run's copies: the agents, their models and tools, all reporting to `port`."""

    def __init__(self, port: TurnPort) -> None:
        self.port = port
        self.provider = MultiProvider()  # what `Runner` resolves a model name with
        self.copies: dict[int, _SDKAgent[Any]] = {}
        self.failures: dict[str, tuple[Exception, str]] = {}
        self.reported: set[str] = set()
        self.proposed: list[ToolCall] = []

    def copy(self, agent: _SDKAgent[Any]) -> _SDKAgent[Any]:
        """`agent` as this run holds it (one copy per agent, handoff cycles included)."""
        found = self.copies.get(id(agent))
        if found is not None:
            return found
        _refuse_hosted(agent)
        functions = [t for t in agent.tools if isinstance(t, FunctionTool)]
        asks = frozenset(t.name for t in functions if t.needs_approval)  # true, or a policy
        tools = [self.tool(t) for t in functions]
        held = agent.clone(
            model=_HeldModel(self, agent.name, agent.model, asks),
            model_settings=agent.model_settings, tools=tools,
        )  # fmt: skip
        self.copies[id(agent)] = held
        held.handoffs = [self.handoff(h) for h in agent.handoffs]
        return held

    def tool(self, tool: FunctionTool) -> FunctionTool:
        """A copy of `tool` that asks the port before it runs and reports what it gave."""
        failures, port, reported = self.failures, self.port, self.reported

        async def failure(ctx: Any, error: Exception) -> str:
            formatter = resolve_function_tool_failure_error_function(tool, ctx)
            if formatter is None:
                raise error  # the tool fails the run, as it would outside thena_nb
            text = formatter(ctx, error)
            if inspect.isawaitable(text):
                text = await text
            failures[ctx.tool_call_id] = (error, str(text))
            return str(text)

        inner = _set_failure_function(copy.copy(tool), failure)
        run_inner = inner.on_invoke_tool

        async def invoke(ctx: ToolContext[Any], input_json: str) -> Any:
            call_id = ctx.tool_call_id
            reported.add(call_id)
            got = port.before_tool(call_id)
            if got is None:
                return await run_inner(ctx, input_json)
            if isinstance(got, Serve):
                return got.text
            arguments = json.dumps(got.arguments) if got.decision == "edit" else input_json
            try:
                value = await run_inner(ctx, arguments)
            except Exception as exc:
                port.after_tool(call_id, error=exc)
                raise
            failed = failures.pop(call_id, None)
            if failed is not None:
                port.after_tool(call_id, error=failed[0], message=failed[1])
            else:
                port.after_tool(call_id, result=value)
            return value

        outer = copy.copy(inner)
        outer.on_invoke_tool = invoke
        outer.needs_approval = False  # a thena_nb gate decided the call before it runs
        return outer

    def handoff(self, entry: Any) -> Handoff[Any, Any]:
        """A handoff that hands off to the target's copy and reports its call."""
        found: Handoff[Any, Any] = entry if isinstance(entry, Handoff) else _handoff(entry)
        original = found.on_invoke_handoff

        async def invoke(ctx: Any, input_json: str) -> Any:
            target = await original(ctx, input_json)
            for call in self.proposed:
                if call.name == found.tool_name and call.id not in self.reported:
                    self.report(call.id, found.get_transfer_message(target))
                    break
            return self.copy(target)

        held = copy.copy(found)
        held.on_invoke_handoff = invoke
        return held

    def report(self, call_id: str, output: str) -> None:
        """A call the SDK answered without running a held tool (a handoff, an MCP tool)."""
        self.reported.add(call_id)
        got = self.port.before_tool(call_id)
        if isinstance(got, ToolCall):
            self.port.after_tool(call_id, result=output)

    def report_outputs(self, items: Any) -> None:
        """The outputs of the open turn's calls that no held tool reported."""
        ids = {c.id for c in self.proposed}
        for item in items:
            plain = _plain(item)
            if not isinstance(plain, dict) or plain.get("type") != "function_call_output":
                continue
            call_id = plain.get("call_id")
            if call_id in ids and call_id not in self.reported:
                self.report(call_id, _output_text(plain.get("output")))


class _HeldModel(Model):
    """The copy's model: each call a turn of the step (`TurnPort.model_call`)."""

    def __init__(
        self, held: _Held, agent_name: str, model: str | Model | None, asks: frozenset[str]
    ) -> None:
        self.held = held
        self.agent_name = agent_name
        self.asks = asks
        """The agent's tools with `needs_approval`: their calls are gated calls."""
        self.named = model
        self.model = _model_name(model) if isinstance(model, Model) else model or ""

    def real(self) -> Model:
        """The agent's own model, resolved when it is first called (a replay calls none)."""
        named = self.named
        if not isinstance(named, Model):
            named = self.named = self.held.provider.get_model(named)
        return named

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        if previous_response_id or conversation_id:
            raise ValueError(
                "a thena_nb step replays what it sent; a server-side conversation "
                "(`previous_response_id`, `conversation_id`) cannot be replayed"
            )
        held = self.held
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        held.report_outputs(items)
        got: dict[str, ModelResponse] = {}

        async def live() -> Reply:
            response = await self.real().get_response(
                system_instructions, input, model_settings, tools, output_schema, handoffs,
                tracing, previous_response_id=None, conversation_id=None, prompt=prompt,
            )  # fmt: skip
            got["response"] = response
            return reply_of(response)

        specs = [_spec(t) for t in tools if isinstance(t, FunctionTool)]
        specs += [ToolSpec(name=h.tool_name, description=h.tool_description or "",
                           parameters=dict(h.input_json_schema)) for h in handoffs]  # fmt: skip
        settings = model_settings.to_json_dict() if model_settings is not None else {}
        asked = ForeignRequest(
            system=system_instructions or "",
            tools=specs,
            canonical=(
                self.agent_name,
                canonical(items),
                output_schema.json_schema() if output_schema is not None else None,
                repr(sorted((k, repr(v)) for k, v in settings.items() if v is not None)),
                repr(prompt),
            ),
            live=live,
            model=self.model,
            max_tokens=int(settings.get("max_tokens") or 0),
            held=frozenset(s.name for s in specs) & self.asks,
        )
        reply, proposed, served = await held.port.model_call(asked)
        held.proposed = list(proposed)
        if not served and "response" in got:
            return got["response"]
        return response_of(reply, proposed)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            "a thena_nb step runs the OpenAI Agents SDK non-streamed (`Runner.run`); "
            "this model is not meant for `Runner.run_streamed`"
        )


def _spec(tool: FunctionTool) -> ToolSpec:
    return ToolSpec(
        name=tool.name,
        description=tool.description or "",
        parameters=dict(tool.params_json_schema),
    )


# -- records both ways ---------------------------------------------------------------------


def reply_of(response: ModelResponse) -> Reply:
    """The SDK's `ModelResponse` as thena_nb's `Reply`."""
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[ToolCall] = []
    for item in response.output:
        if isinstance(item, ResponseOutputMessage):
            for part in item.content:
                if isinstance(part, ResponseOutputText):
                    texts.append(part.text)
                elif isinstance(part, ResponseOutputRefusal):
                    texts.append(part.refusal)
        elif isinstance(item, ResponseFunctionToolCall):
            arguments = parse_arguments(item.arguments)
            calls.append(ToolCall(id=item.call_id, name=item.name, arguments=arguments))
        elif isinstance(item, ResponseReasoningItem):
            thoughts += [s.text for s in item.summary]
    usage = response.usage
    return Reply(
        text="".join(texts),
        tool_calls=calls,
        finish_reason="tool_calls" if calls else "stop",
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        cache_read_tokens=usage.input_tokens_details.cached_tokens or 0,
        cache_write_tokens=getattr(usage.input_tokens_details, "cache_write_tokens", 0) or 0,
        reasoning="\n\n".join(thoughts) if thoughts else None,
        reasoning_tokens=usage.output_tokens_details.reasoning_tokens or 0,
        response_id=response.response_id,
    )


def response_of(reply: Reply, calls: Sequence[ToolCall]) -> ModelResponse:
    """A recorded reply as the `ModelResponse` the model gave: its text, its calls with
    their ids and the model's own arguments, and its usage."""
    output: list[Any] = []
    if reply.text:
        text = ResponseOutputText(type="output_text", text=reply.text, annotations=[])
        output.append(
            ResponseOutputMessage(
                id="", type="message", role="assistant", status="completed", content=[text]
            )
        )
    for call in calls:
        arguments = call.original_arguments if call.original_arguments is not None else None
        output.append(
            ResponseFunctionToolCall(
                type="function_call",
                call_id=call.id,
                name=call.name,
                arguments=json.dumps(arguments or call.arguments),
            )
        )
    usage = Usage(
        requests=1,
        input_tokens=reply.input_tokens,
        output_tokens=reply.output_tokens,
        total_tokens=reply.input_tokens + reply.output_tokens,
        input_tokens_details=InputTokensDetails(
            cached_tokens=reply.cache_read_tokens, cache_write_tokens=reply.cache_write_tokens
        ),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=reply.reasoning_tokens),
    )
    return ModelResponse(output=output, usage=usage, response_id=None)


def _plain(item: Any) -> Any:
    """An input item as plain data (the SDK passes dicts, and sometimes its own models)."""
    if isinstance(item, BaseModel):
        return item.model_dump(exclude_none=True, by_alias=True)
    return item


def _output_text(output: Any) -> str:
    return output if isinstance(output, str) else to_text(output)


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = [_plain(p) for p in content or ()]
    return "".join(
        str(p.get("text") or p.get("refusal") or "") if isinstance(p, dict) else str(p)
        for p in parts
    )


def canonical(items: Sequence[Any]) -> tuple[Any, ...]:
    """What the input items say, without per-run values: messages as role and text, calls
    as id, name and arguments, outputs as the text the model reads; no reasoning items."""
    out: list[Any] = []
    for item in items:
        plain = _plain(item)
        if not isinstance(plain, dict):
            out.append(repr(plain))
            continue
        kind = plain.get("type", "message")
        if kind == "message":
            out.append((plain.get("role"), _message_text(plain.get("content"))))
        elif kind == "function_call":
            arguments = json.dumps(parse_arguments(plain.get("arguments")), sort_keys=True)
            out.append(("call", plain.get("call_id"), plain.get("name"), arguments))
        elif kind == "function_call_output":
            out.append(("output", plain.get("call_id"), _output_text(plain.get("output"))))
        elif kind == "reasoning":
            continue  # the model's, with its provider's ids; the reply keeps its text
        else:
            out.append(_without_per_run(plain))
    return tuple(out)


def _without_per_run(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(
            (k, _without_per_run(v))
            for k, v in sorted(value.items())
            if k not in _PER_RUN and v is not None
        )
    if isinstance(value, list):
        return tuple(_without_per_run(v) for v in value)
    return value


def to_items(history: Sequence[Message], me: str) -> list[Any]:
    """The run's history as the SDK's input items for agent `me`: its own turns as its
    messages, function calls and their outputs, everything else as user text (other
    agents' attributed)."""
    out: list[Any] = []
    calls: set[str] = set()
    for m in history:
        if m.role == "assistant" and m.agent == me:
            if m.content:
                out.append({"role": "assistant", "content": m.content})
            for c in m.tool_calls:
                calls.add(c.id)
                out.append(
                    {
                        "type": "function_call",
                        "call_id": c.id,
                        "name": c.name,
                        "arguments": json.dumps(c.arguments),
                    }
                )
        elif m.role == "tool" and m.agent == me and m.tool_call_id in calls:
            out.append(
                {"type": "function_call_output", "call_id": m.tool_call_id, "output": m.content}
            )
        elif m.role == "user":
            out.append({"role": "user", "content": m.content})
        elif m.role == "assistant" and m.content:
            out.append({"role": "user", "content": f"[{m.agent}] {m.content}"})
        elif m.role == "tool":
            out.append({"role": "user", "content": f"[{m.agent}] tool result: {m.content}"})
    return out
