"""`record` for an OpenAI Agents SDK `Agent`: its own hooks and a recording model, held on the
agent (and the agents its handoffs reach) for the block.

The SDK offers three public seams; what each carries decided how they are used:

- `agent.hooks` (an `AgentHooks`): the SDK calls them for every run of the agent, with the
  run's context (`on_start`, `on_llm_start` with the instructions and input items,
  `on_llm_end` with the `ModelResponse`, `on_tool_end` with the call id and what the tool gave,
  `on_end` with the final output). A run's context keeps one `Usage` object for the whole run,
  which tells concurrent runs apart (`asyncio.gather` of two `Runner.run`). The block puts a
  `_Hooks` there that records and then calls the agent's own hooks.
- `agent.model` (an `agents.Model`): only the model is given the whole request (its tools,
  handoffs, output schema, model settings and prompt), which a turn's request key covers. The
  block puts a `_Recorder` there that passes every call to the agent's own model unchanged
  (a model name is resolved by the SDK's default provider, as the runner and
  `Workflow.of(agent)` resolve it) and keeps the request as `Workflow.of(agent)` keys it, so
  `Workflow.of(agent).run(x, replay=run)` serves a recorded run. The model call is linked to
  its run by the input list the SDK hands to both `on_llm_start` and the model.
- trace processors: not used. With the default Responses model a response span carries no
  messages unless tracing is on and told to include data, and a custom `Model` makes no
  spans at all.

A turn is a model call; its calls' results are what the tools gave (`on_tool_end`), else what
the next request tells the model of them (a handoff's transfer message, an MCP tool's output).
The agents' own hooks and models are put back when the block ends, also when it raises.

Limits: a run started with another agent (a handoff target run on its own) is not recorded; a
handoff to an agent the block cannot reach (a `Handoff` not made by `handoff(agent)`) leaves
that agent's model calls out; `RunConfig(model=...)` replaces the agent's model for the run,
so its turns are seen by the hooks only and keyed without the request's settings (a replay
goes live there); an agent whose model is a name has it resolved by the SDK's default provider
inside the block, also in a run that passes its own `RunConfig(model_provider=...)` (the model
is not told the run's configuration). A run that stops for a tool's approval
(`needs_approval`) is recorded as unfinished (`Unfinished`), and its resumption from its
`RunState` as another run. A tool's exception that the SDK's `failure_error_function` turned
into text is recorded as that text, an ok result, as the SDK reports it to its hooks
(`Workflow.of` records it as a failed call).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from agents import Agent as SDKAgent
from agents import AgentHooks, FunctionTool, Handoff, Model, ModelResponse, ModelTracing
from agents import handoff as make_handoff
from agents.models.multi_provider import MultiProvider

from thena_nb.core.records._text import to_text
from thena_nb.core.records.model import ToolSpec
from thena_nb.frameworks._record_base import Seen, Taken, clock, close_unended
from thena_nb.frameworks.openai_agents import _model_name, _model_of, _spec, canonical, reply_of

__all__ = ["OpenAIAgentsHook"]

_GENERATED = "agents-sdk:"
"""How the prompt cache keys the runner makes itself begin (`prompt_cache_key.py`)."""


class OpenAIAgentsHook:
    """Records every run of an OpenAI Agents SDK agent inside the block (see the module)."""

    framework = "OpenAI Agents SDK"

    def __init__(self, agent: Any, name: str | None) -> None:
        found = getattr(agent, "name", None) or name
        if not found:
            raise ValueError(
                "this OpenAI Agents SDK agent has no name; give it one "
                "(`Agent(name='Forecaster', ...)`) or pass `record(agent, name='Forecaster')`"
            )
        self.agent = agent
        self.name: str = found
        self.model = _model_of(agent.model)
        self._runs: dict[int, Taken | None] = {}
        """By the id of the run's `Usage`; `None`: a run started with another agent."""
        self._usages: list[Any] = []  # kept alive, so that no other run gets the same id
        self._asked: dict[int, tuple[Any, Seen]] = {}
        """By the id of the input list the SDK gave `on_llm_start`: the model call it opened."""
        self._open: dict[int, int] = {}
        """By run: the id of the input list of its open model call."""
        self._held: list[tuple[Any, Any, Any]] = []
        self._lock = threading.Lock()
        self._provider: MultiProvider | None = None

    def start(self) -> None:
        for agent in _reachable(self.agent):
            self._held.append((agent, agent.model, agent.hooks))
            agent.model = _Recorder(self, agent)
            agent.hooks = _Hooks(self, agent.hooks)

    def stop(self, error: BaseException | None) -> None:
        held, self._held = self._held, []
        for agent, model, hooks in reversed(held):
            if isinstance(agent.model, _Recorder) and agent.model.hook is self:
                agent.model = model
            if isinstance(agent.hooks, _Hooks) and agent.hooks.hook is self:
                agent.hooks = hooks
        with self._lock:
            self._asked.clear()
            for taken in self.taken():
                close_unended(taken, error, self.framework)

    def taken(self) -> list[Taken]:
        return [t for t in self._runs.values() if t is not None]

    def provider(self) -> MultiProvider:
        """What resolves a model name: the SDK's default provider, as `Runner` resolves it."""
        if self._provider is None:
            self._provider = MultiProvider()
        return self._provider

    # -- what the hooks tell ---------------------------------------------------------------

    def run_of(self, context: Any, agent: Any) -> Taken | None:
        """The record of the run `context` belongs to (a new one at its first event);
        `None` for a run that started with another agent."""
        usage = getattr(context, "usage", None)
        if usage is None:
            return None
        with self._lock:
            key = id(usage)
            if key not in self._runs:
                self._usages.append(usage)
                mine = agent is self.agent
                said = getattr(context, "turn_input", None) or []
                self._runs[key] = Taken(input=_input(said)) if mine else None
            return self._runs[key]

    def asking(self, context: Any, agent: Any, system: str | None, items: list[Any]) -> None:
        """The SDK is about to call the model with `items`: the calls' outputs among them are
        the last reply's results, and a model call opens (its request as the agent declares
        it, until the model itself is given the whole request)."""
        taken = self.run_of(context, agent)
        if taken is None:
            return
        said = canonical(items)
        with self._lock:
            for entry in said:  # what the model is told of the calls it made
                if len(entry) == 3 and entry[0] == "output":
                    taken.result(str(entry[1]), True, str(entry[2]), final=False)
            started_at, t0 = clock()
            recorder = agent.model if isinstance(agent.model, _Recorder) else None
            seen = Seen(
                system=system or "",
                tools=_declared(agent),
                canonical=("declared", agent.name, said),
                model=recorder.model if recorder is not None else _model_name(agent.model),
                started_at=started_at,
                t0=t0,
            )
            taken.seen.append(seen)
            self._asked[id(items)] = (items, seen)
            self._open[id(context.usage)] = id(items)

    def sent(self, recorder: _Recorder, request: dict[str, Any]) -> Seen | None:
        """The model was given `request` (`get_response`'s arguments): the open model call's
        request as `Workflow.of(agent)` keys it; `None` for a call of no recorded run."""
        items = request["input"]
        with self._lock:
            found = self._asked.get(id(items))
        if found is None or found[0] is not items:
            return None
        seen = found[1]
        seen.system, seen.tools, seen.canonical, seen.max_tokens = _request(
            recorder.agent_name, request
        )
        seen.model = recorder.model
        seen.started_at, seen.t0 = clock()  # again, when the SDK retries the call
        seen.reply = seen.error = None
        return seen

    def answered(self, context: Any, response: ModelResponse) -> None:
        """The model answered the run's open call (a streamed answer is known only here)."""
        taken = self._known(context)
        if taken is None or not taken.seen:
            return
        with self._lock:
            opened = self._open.pop(id(context.usage), None)
            if opened is not None:
                self._asked.pop(opened, None)
        seen = taken.seen[-1]
        if seen.reply is None:
            seen.error = None
            seen.answered(reply_of(response))

    def tool_ended(self, context: Any, result: Any) -> None:
        """A tool gave `result` for the call in `context` (a `ToolContext`)."""
        taken = self._known(context)
        call_id = getattr(context, "tool_call_id", None)
        if taken is not None and isinstance(call_id, str):
            with self._lock:
                taken.result(call_id, True, to_text(result))

    def ended(self, context: Any, output: Any) -> None:
        """The run ended with `output` (the SDK's `final_output`)."""
        taken = self._known(context)
        if taken is not None:
            taken.output, taken.ended = output, True
            taken.finished_at = datetime.now(UTC)

    def _known(self, context: Any) -> Taken | None:
        usage = getattr(context, "usage", None)
        with self._lock:
            return self._runs.get(id(usage)) if usage is not None else None


def _reachable(top: Any) -> list[Any]:
    """`top` and every agent its handoffs reach (a `Handoff` by the agent it was made for)."""
    found: dict[int, Any] = {}
    todo: list[Any] = [top]
    while todo:
        agent = todo.pop()
        if not isinstance(agent, SDKAgent) or id(agent) in found:
            continue
        found[id(agent)] = agent
        for entry in agent.handoffs:
            ref = getattr(entry, "_agent_ref", None)  # a `Handoff` made by `handoff(agent)`
            todo.append((ref() if callable(ref) else None) if isinstance(entry, Handoff) else entry)
    return list(found.values())


def _input(items: Sequence[Any]) -> str:
    """The run's input: its last user message (the text of `Runner.run(agent, text)`)."""
    for entry in reversed(canonical(items)):
        if len(entry) == 2 and entry[0] == "user":
            return str(entry[1])
    return ""


def _handoff_spec(entry: Any) -> ToolSpec:
    found: Handoff[Any, Any] = entry if isinstance(entry, Handoff) else make_handoff(entry)
    return ToolSpec(
        name=found.tool_name,
        description=found.tool_description or "",
        parameters=dict(found.input_json_schema),
    )


def _declared(agent: Any) -> list[ToolSpec]:
    """The tools and handoffs the agent declares (the model is given the enabled ones)."""
    specs = [_spec(t) for t in agent.tools if isinstance(t, FunctionTool)]
    return specs + [_handoff_spec(h) for h in agent.handoffs]


def _request(agent_name: str, request: dict[str, Any]) -> tuple[str, list[ToolSpec], Any, int]:
    """A model call's system text, tools, canonical form and output limit, as
    `Workflow.of(agent)`'s model (`openai_agents._HeldModel`) makes them for its key."""
    given = request["input"]
    items = [{"role": "user", "content": given}] if isinstance(given, str) else given
    specs = [_spec(t) for t in request["tools"] if isinstance(t, FunctionTool)]
    specs += [
        ToolSpec(
            name=h.tool_name,
            description=h.tool_description or "",
            parameters=dict(h.input_json_schema),
        )
        for h in request["handoffs"]
    ]
    settings = _settings(request["model_settings"])
    schema = request["output_schema"]
    said = (
        agent_name,
        canonical(items),
        schema.json_schema() if schema is not None else None,
        repr(sorted((k, repr(v)) for k, v in settings.items() if v is not None)),
        repr(request["prompt"]),
    )
    return request["system_instructions"] or "", specs, said, int(settings.get("max_tokens") or 0)


def _settings(model_settings: Any) -> dict[str, Any]:
    """The model settings as JSON, without the prompt cache key the runner made for the run
    (a per-run value, which `Workflow.of(agent)`'s model does not ask the runner for)."""
    if model_settings is None:
        return {}
    extra = model_settings.extra_args
    key = extra.get("prompt_cache_key") if isinstance(extra, dict) else None
    if isinstance(key, str) and key.startswith(_GENERATED):
        rest = {k: v for k, v in extra.items() if k != "prompt_cache_key"}
        model_settings = replace(model_settings, extra_args=rest or None)
    settings: dict[str, Any] = model_settings.to_json_dict()
    return settings


class _Hooks(AgentHooks[Any]):
    """The agent's hooks for the block: each event recorded, then given to its own hooks."""

    def __init__(self, hook: OpenAIAgentsHook, inner: Any) -> None:
        self.hook = hook
        self.inner = inner

    async def on_start(self, context: Any, agent: Any) -> None:
        self.hook.run_of(context, agent)
        if self.inner is not None:
            await self.inner.on_start(context, agent)

    async def on_end(self, context: Any, agent: Any, output: Any) -> None:
        self.hook.ended(context, output)
        if self.inner is not None:
            await self.inner.on_end(context, agent, output)

    async def on_handoff(self, context: Any, agent: Any, source: Any) -> None:
        if self.inner is not None:
            await self.inner.on_handoff(context, agent, source)

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        if self.inner is not None:
            await self.inner.on_tool_start(context, agent, tool)

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        self.hook.tool_ended(context, result)
        if self.inner is not None:
            await self.inner.on_tool_end(context, agent, tool, result)

    async def on_llm_start(
        self, context: Any, agent: Any, system_prompt: str | None, input_items: list[Any]
    ) -> None:
        self.hook.asking(context, agent, system_prompt, input_items)
        if self.inner is not None:
            await self.inner.on_llm_start(context, agent, system_prompt, input_items)

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        self.hook.answered(context, response)
        if self.inner is not None:
            await self.inner.on_llm_end(context, agent, response)

    def __getattr__(self, name: str) -> Any:
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


class _Recorder(Model):
    """The agent's own model for the block: every call passed on unchanged, its request kept
    for the run that made it."""

    def __init__(self, hook: OpenAIAgentsHook, agent: Any) -> None:
        self.hook = hook
        self.agent_name: str = agent.name
        named = agent.model
        self.named: str | Model | None = named
        self.model: str = _model_name(named) if isinstance(named, Model) else named or ""
        """The model's name as `Workflow.of(agent)` names a turn's model."""
        self._real: Model | None = named if isinstance(named, Model) else None

    def real(self) -> Model:
        """The agent's own model (a name resolved when it is first called)."""
        if self._real is None:
            self._real = self.hook.provider().get_model(
                self.named if isinstance(self.named, str) else None
            )
        return self._real

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
        asked = dict(
            system_instructions=system_instructions, input=input, model_settings=model_settings,
            tools=tools, output_schema=output_schema, handoffs=handoffs, prompt=prompt,
        )  # fmt: skip
        seen = self.hook.sent(self, asked)
        try:
            response = await self.real().get_response(
                system_instructions, input, model_settings, tools, output_schema, handoffs,
                tracing, previous_response_id=previous_response_id,
                conversation_id=conversation_id, prompt=prompt,
            )  # fmt: skip
        except BaseException as exc:
            if seen is not None:
                seen.failed(exc)
            raise
        if seen is not None:
            seen.answered(reply_of(response))
        return response

    async def stream_response(
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
    ) -> AsyncIterator[Any]:
        asked = dict(
            system_instructions=system_instructions, input=input, model_settings=model_settings,
            tools=tools, output_schema=output_schema, handoffs=handoffs, prompt=prompt,
        )  # fmt: skip
        seen = self.hook.sent(self, asked)
        try:
            async for event in self.real().stream_response(
                system_instructions, input, model_settings, tools, output_schema, handoffs,
                tracing, previous_response_id=previous_response_id,
                conversation_id=conversation_id, prompt=prompt,
            ):  # fmt: skip
                yield event
        except Exception as exc:  # the answer itself is told to `on_llm_end`
            if seen is not None:
                seen.failed(exc)
            raise

    def get_retry_advice(self, request: Any) -> Any:
        return self.real().get_retry_advice(request)

    def _supports_default_prompt_cache_key(self) -> bool:
        """As the agent's own model says: the runner then adds the prompt cache key it
        would add without `record` (left out of the request key, see `_settings`)."""
        supports = getattr(self.real(), "_supports_default_prompt_cache_key", None)
        return bool(supports()) if callable(supports) else False

    async def _cleanup_on_run_end(self, owner: object) -> None:
        if self._real is not None:
            await self._real._cleanup_on_run_end(owner)

    async def close(self) -> None:
        if self._real is not None:
            await self._real.close()
