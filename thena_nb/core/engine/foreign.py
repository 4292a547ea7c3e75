"""Agents of other frameworks as steps: `ForeignAgent`, and the `TurnPort` they report to.

A foreign agent runs its own loop (model call, its tools, model call, ...). As a thena_nb step
its whole run is the step, and **each of its model calls is one thena_nb turn** on the same
executor as a native agent's, made by the same phase functions (`_turn.py`): the session's
pause points, stop and budget, the request key and replay, the model call with the
executor's retries, tool gates, and the turn's record (persisted before the next model call,
S28). Only who runs the tools differs: the framework does, and tells the port.

A framework adapter (`thena_nb/frameworks/`) holds the framework at two seams and calls:

- `await port.model_call(ForeignRequest(...))` where the framework is about to call its
  model. The port closes the previous turn (its tools are done), opens this one, and either
  calls `request.live()` (the framework's own model) or serves the recorded reply (replay, a
  fork's replayed prefix, a resume). It returns the reply, the calls as gates left them, and
  whether the reply was served: a served reply is made into the framework's own answer.
- `port.before_tool(call_id)` where the framework is about to run a tool: `Serve` (a
  recorded result, or a gate's rejection or response: don't run it) or the call to run (its
  arguments as a gate may have edited them); then `port.after_tool(call_id, ...)` with what
  the tool returned or raised.

`run_foreign` drives one step: it asks the agent to `drive(port)` its framework once over the
run's history, closes the last turn, and makes the framework's output the step's output.
"""

from __future__ import annotations

import time
from abc import ABCMeta, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

from thena_nb.core import _portals
from thena_nb.core.engine import _observe
from thena_nb.core.engine._run_state import Position
from thena_nb.core.engine._signals import Halt, note_once
from thena_nb.core.engine._turn import (
    _add_results,
    _count_failures,
    _recorded_results,
    _restore_state,
    _turn,
    answered,
    calls,
    decided,
    gate,
    may_pause,
    pauses_before_tools,
    record,
    request,
)
from thena_nb.core.parts.agent import Agent
from thena_nb.core.parts.tools import SchemaTool, _traceback_text, error_observation
from thena_nb.core.records._keys import blake
from thena_nb.core.records._text import to_text
from thena_nb.core.records.events import event
from thena_nb.core.records.model import ModelRequest, Reply, ToolSpec, render_request
from thena_nb.core.records.report import ReportNode
from thena_nb.core.records.types import Message, SentRequest, ToolCall, Turn, finished

__all__ = [
    "KINDS",
    "ForeignAgent",
    "ForeignRequest",
    "GateSpec",
    "Serve",
    "TurnPort",
    "run_foreign",
]

KINDS = (
    "a thena_nb `Agent`, a pydantic-ai `Agent`, an OpenAI Agents SDK `Agent`, a compiled "
    "LangGraph graph or a smolagents agent"
)
"""What `Workflow.of` takes, as its error says (`thena_nb.frameworks` holds the others)."""

GateSpec = bool | Sequence[str] | Callable[[ToolCall], Any] | None
"""`Workflow.of(agent, gate=...)`: `True` (every tool), tool names, or `fn(call) -> bool`."""


class Serve(NamedTuple):
    """A tool call the framework must not run: give the model `text` (`ok` False: as a
    failed call)."""

    ok: bool
    text: str


@dataclass
class ForeignRequest:
    """What a framework is about to send its model, as thena_nb sees it.

    Attributes:
        system: The instructions and system prompts, joined.
        tools: The tools the model is offered, with their JSON schemas.
        canonical: What else the framework sends, with per-run values (timestamps, run ids,
            provider response ids) left out: part of the request key, so a replay that
            would send something else goes live there and says so (`replay_diverged_at`).
        live: Calls the framework's model and returns its answer as a `Reply`.
        model: The model's name.
        max_tokens: The output limit, when the framework sets one.
        held: Tools whose calls the framework itself holds for approval (pydantic-ai's
            `requires_approval`): gated, whatever `Workflow.of(..., gate=)` says.
    """

    system: str
    tools: list[ToolSpec]
    canonical: Any
    live: Callable[[], Awaitable[Reply]]
    model: str = ""
    max_tokens: int = 0
    held: frozenset[str] = frozenset()


class _Live:
    """The model of a foreign turn: the framework's own call for this request."""

    def __init__(self, name: str, provider: Any) -> None:
        self.name = name
        if provider is not False:
            self.provider = provider  # priced like a native adapter (`thena_nb.cost`)
        self.call: Callable[[], Awaitable[Reply]] | None = None
        self.renderer: Callable[[ModelRequest], dict[str, Any]] = render_request

    def render(self, request: ModelRequest) -> dict[str, Any]:
        """What the framework was sent for `request`, in its own form (`run.wire_request_of`)."""
        return self.renderer(request)

    async def respond(self, request: ModelRequest) -> Reply:
        assert self.call is not None, "a foreign turn's model is called from its port only"
        return await self.call()


async def _runs_in_its_framework(arguments: dict[str, Any]) -> str:
    raise AssertionError("a foreign agent's tools run in their own framework")


class ForeignAgent(Agent, metaclass=ABCMeta):
    """An agent of another framework as a step: its whole run, one turn per model call.

    Made by `Workflow.of(agent)` (or by putting the framework's agent in a workflow's steps);
    the subclasses in `thena_nb.frameworks` hold each framework. It is an `Agent` to the rest
    of thena_nb: its name attributes its turns and messages, `changes={name: {...}}` reach it
    through `replace`, and experiments fingerprint it by its configuration.

    Attributes:
        target: The framework's own agent.
        gate: Which of its tools' calls wait for a `Decision` before they run.
    """

    framework = "another framework"
    """The framework's name, as users know it."""

    def __init__(self, name: str, *, target: Any, model: _Live, gate: GateSpec = None) -> None:
        super().__init__(name, model=model, rescue=False)
        self.target = target
        self.gate = gate
        model.renderer = self.wire

    @abstractmethod
    async def drive(self, port: TurnPort) -> Any:
        """Run the framework's agent once over `port.history`, reporting every model call
        and tool call to `port`; returns its output."""

    @abstractmethod
    def configuration(self) -> Any:
        """What the agent is, for fingerprints: model and settings, instructions, tools'
        functions, output type (values and functions, never memory addresses)."""

    changeable: tuple[str, ...] = ("instructions", "system", "model", "model_settings", "name")
    """What `replace` (fork's and experiments' `changes`) may change; `system` is
    `instructions`."""
    overrides: dict[str, Any]
    """The changes `replace` made, applied to the framework's agent when the step runs."""

    @classmethod
    def step_name(cls, agent: Any, name: str | None, overrides: dict[str, Any]) -> str:
        """The step's name: a changed one, else the agent's, else `Workflow.of(name=)`.

        Raises:
            ValueError: None of them is given (the message says how to give one).
        """
        found: str | None = overrides.get("name") or getattr(agent, "name", None) or name
        if not found:
            raise ValueError(
                f"this {cls.framework} agent has no name; give it one (e.g. "
                f"`Agent(..., name='Forecaster')`) or pass `Workflow.of(agent, name='Forecaster')`"
            )
        return found

    def replace(self, **changes: Any) -> ForeignAgent:
        """A copy with some fields of the framework's agent replaced (fork and experiments).

        Raises:
            ValueError: A field is not one of `changeable` (the message lists them).
        """
        unknown = sorted(set(changes) - set(self.changeable))
        if unknown:
            raise ValueError(
                f"{self.framework} agent {self.name!r} has no changeable field "
                f"{unknown[0]!r}; changeable fields: {', '.join(self.changeable)}"
            )
        step: Callable[..., ForeignAgent] = type(self)
        return step(
            self.target, name=self.name, gate=self.gate, overrides={**self.overrides, **changes}
        )

    def wire(self, request: ModelRequest) -> dict[str, Any]:
        """A turn's request as the framework sends it (its messages or input items, as JSON),
        for `run.wire_request_of`; thena_nb's own form unless the framework says otherwise."""
        return render_request(request)

    def __thena_fingerprint__(self) -> Any:
        return (type(self).__qualname__, self.name, self.configuration(), self._gate_shown())

    def _gate_shown(self) -> Any:
        g = self.gate
        return g if g is None or isinstance(g, bool) or callable(g) else tuple(g)

    def gated(self, tool_name: str) -> bool | Callable[[ToolCall], Any]:
        """The `gate` of the turn's tool `tool_name`, from `Workflow.of(..., gate=)`."""
        g = self.gate
        if g is None or g is False:
            return False
        if g is True or callable(g):
            return g
        return tool_name in g

    def turn_agent(self, request: ForeignRequest, made: dict[str, tuple[Agent, str]]) -> Agent:
        """The `Agent` a turn is made with: this agent's name, the request's instructions
        and tools (gated as asked), and a key that covers the whole request.

        `made` keeps the agents one run of the step made (with their keys before the
        request), by the request's instructions, tools and model: a turn's agent carries the
        call to its framework's model, so runs of the step (an experiment's, at once) never
        share one."""
        specs = request.tools
        shape = blake()
        shape.update(request.system.encode())
        for spec in specs:
            shape.update(spec.model_dump_json().encode())
        shape.update(request.model.encode())
        shape.update(repr(sorted(request.held)).encode())
        kept = made.get(shape.hexdigest())
        if kept is None:
            tools = [
                SchemaTool(
                    _runs_in_its_framework,
                    name=spec.name,
                    parameters=spec.parameters,
                    description=spec.description,
                    validate=_portals.schema_check(spec.name, spec.parameters),
                    rescue=False,
                    gate=True if spec.name in request.held else self.gated(spec.name),
                )
                for spec in specs
            ]
            live = _Live(request.model or self.model.name, getattr(self.model, "provider", False))
            live.renderer = self.wire
            found: Agent = Agent(
                self.name,
                model=live,
                system=request.system,
                tools=tools,
                rescue=False,
                max_tokens=request.max_tokens,
            )
            kept = made[shape.hexdigest()] = (found, found.key)
        found, base = kept
        h = blake()
        h.update(base.encode())
        h.update(repr(request.canonical).encode())
        found.__dict__["_key"] = h.hexdigest()  # (not `setattr`, which clears it)
        live_model = found.model
        assert isinstance(live_model, _Live)
        live_model.call = request.live
        return found

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, model={self.model.name!r})"


@dataclass
class _Open:
    """A turn whose model answered and whose tools the framework is running."""

    agent: Agent
    asked: tuple[str, SentRequest | None]
    recorded: Turn | None
    reply: Reply
    proposed: list[ToolCall]
    started_at: datetime
    t0: float
    attempts: int
    first: int
    served_tools: bool
    by_id: dict[str, ToolCall] = field(default_factory=dict)
    done: dict[str, ToolCall] = field(default_factory=dict)


class TurnPort:
    """Where a foreign agent's framework reports its model and tool calls (see the module)."""

    def __init__(self, step: ForeignAgent, at: Position, node: ReportNode) -> None:
        self.step = step
        self.at = at
        self.node = node
        self.open: _Open | None = None
        self._made: dict[str, tuple[Agent, str]] = {}

    @property
    def history(self) -> list[Message]:
        """The run's history as this branch sees it: the step reads it as its messages."""
        return self.at.scope.history

    @property
    def deps(self) -> Any:
        """What `wf.run(input, deps=...)` passed for the framework's dependencies."""
        return self.at.control.deps

    @property
    def streaming(self) -> bool:
        """Whether someone listens for text as it arrives (`Session.subscribe`, the Stepper):
        a framework that can stream its model's answer then does, and tells `text_delta`."""
        return bool(self.at.control.subscribers)

    def text_delta(self, text: str) -> None:
        """A piece of the model's text as it arrives: a `"text_delta"` event, as a streaming
        native adapter sends; none for a served answer (no model call, as in a native replay)."""
        control = self.at.control
        served = self.open is not None and self.open.recorded is not None
        if control.subscribers and text and not served:
            control.emit(event("text_delta", path=self.node.path, agent=self.step.name, text=text))

    async def model_call(self, asked: ForeignRequest) -> tuple[Reply, list[ToolCall], bool]:
        """A model call of the framework: the reply (live or served), its calls with the
        gates' decisions, and whether it was served (no model call was made)."""
        if self.open is not None:
            await self.close()
        at, node, path = self.at, self.node, self.node.path
        control = at.control
        if control.checkpoint is not None and may_pause(at):
            await control.checkpoint("model")
        gate(control)
        agent = self.step.turn_agent(asked, self._made)
        key, recorded = request(agent, at, path)
        started_at, t0 = datetime.now(UTC), time.perf_counter()
        reply, attempts, sent = await answered(agent, at, node, recorded)
        history = at.scope.history
        first = len(history)
        # Ids kept as the framework gave them (it answers its calls by them); the run's.
        reply, proposed = calls(agent, reply, key, history, recorded, control.call_ids)
        replay = control.replay
        served_tools = recorded is not None and replay is not None and not replay.rerun_tools
        try:
            if proposed and (agent._gated or control.gates):
                timing = (started_at, time.perf_counter() - t0, attempts)
                proposed = await decided(
                    agent, at, path, (key, sent), recorded, reply, proposed, timing
                )
            pause = proposed and not served_tools and pauses_before_tools(control)
            if pause and control.checkpoint is not None and may_pause(at):
                await control.checkpoint("tools")
        except Halt:
            del history[first:]  # held before its tools ran: the turn is not recorded
            raise
        self.open = _Open(
            agent, (key, sent), recorded, reply, proposed, started_at, t0, attempts, first,
            served_tools, by_id={c.id: c for c in proposed},
        )  # fmt: skip
        return reply, proposed, recorded is not None

    def before_tool_arguments(self, call_id: str) -> dict[str, Any] | None:
        """The arguments a gate's edit gave call `call_id`, for a framework that checks
        arguments before it runs a call; `None` when they are the model's."""
        open = self.open
        call = open.by_id.get(call_id) if open is not None else None
        if call is None or call.decision != "edit" or (open is not None and open.served_tools):
            return None
        return dict(call.arguments)

    def decision_of(self, call_id: str) -> ToolCall | None:
        """Call `call_id` as the gates decided it (`decision`: approve, edit, reject or
        respond), as recorded when the turn was served; for a framework that asks for its own
        approvals. `None` for a call this turn did not propose."""
        open = self.open
        call = open.by_id.get(call_id) if open is not None else None
        if open is None or call is None:
            return None
        if open.served_tools and open.recorded is not None:
            recorded = {c.id: c for c in open.recorded.tool_calls}
            return recorded.get(call_id, call)
        return call

    def before_tool(self, call_id: str) -> ToolCall | Serve | None:
        """The framework is about to run call `call_id`: `Serve` when it must not (a
        recorded result, a rejection, a response), else the call to run (its arguments as
        a gate left them); `None` for a call this turn did not propose."""
        open = self.open
        call = open.by_id.get(call_id) if open is not None else None
        if open is None or call is None:
            return None
        if call_id in open.done:  # reported already: the same outcome again
            done = open.done[call_id]
            return Serve(bool(done.ok), (done.result if done.ok else done.error) or "")
        if open.served_tools:
            assert open.recorded is not None
            done = _recorded_results([call], open.recorded)[0]
            open.done[call_id] = done
            return Serve(bool(done.ok), (done.result if done.ok else done.error) or "")
        if call.ok is not None:  # decided: rejected or responded to
            open.done[call_id] = call
            return Serve(call.ok, (call.result if call.ok else call.error) or "")
        control = self.at.control
        if control.subscribers:
            control.emit(event("tool_started", agent=self.step.name, tool_call=call))
        if _observe.observer is not None:
            _observe.observer.tool_started(open.agent, call)
        return call

    def after_tool(
        self,
        call_id: str,
        *,
        result: Any = None,
        error: BaseException | None = None,
        message: str | None = None,
    ) -> None:
        """What call `call_id` gave: its `result`, or the `error` it raised (`message`: what
        the framework tells the model of it, when not the error itself)."""
        open = self.open
        call = open.by_id.get(call_id) if open is not None else None
        if open is None or call is None or call_id in open.done:
            return
        if error is None:
            done = finished(call, ok=True, result=to_text(result))
        else:
            text = message or error_observation(call.name, call.arguments, exc=error)
            done = finished(call, ok=False, error=text, traceback=_traceback_text(error))
        open.done[call_id] = done
        if _observe.observer is not None:
            _observe.observer.tool_finished(call, done)
        control = self.at.control
        if control.subscribers:
            control.emit(event("tool_finished", agent=self.step.name, tool_call=done))

    async def close(self) -> None:
        """Record the open turn with its calls' outcomes, in call order (S27), before the
        next model call (S28); a call the framework never ran is a failed call that says so."""
        open, self.open = self.open, None
        if open is None:
            return
        at = self.at
        if open.served_tools and open.recorded is not None:
            done = _recorded_results(open.proposed, open.recorded)
        else:
            done = [open.done.get(c.id) or _not_run(c, self.step) for c in open.proposed]
        _add_results(at.scope.history, self.step.name, done)
        control = at.control
        control.run.usage.__dict__["tool_calls"] += len(done)
        if open.recorded is not None and control.replay is not None:
            _restore_state(at.ctx.state, control.replay.state_after(len(at.scope.turns)))
        failures = _count_failures(at.loops, done) if at.stopped is None else []
        timing = (open.started_at, time.perf_counter() - open.t0, open.attempts)
        path = self.node.path
        turn = _turn(open.agent, at, path, open.asked, open.recorded, open.reply, done, timing)
        if _observe.observer is not None:
            _observe.observer.turn_finished(self.node, turn)
        await record(open.agent, at, self.node, turn, done, open.first, failures)


def _not_run(call: ToolCall, step: ForeignAgent) -> ToolCall:
    if call.ok is not None:
        return call
    reason = f"{step.framework} ended the agent's run before it ran this call"
    return finished(
        call, ok=False, error=error_observation(call.name, call.arguments, reason=reason)
    )


async def run_foreign(step: ForeignAgent, at: Position, node: ReportNode) -> None:
    """Run `step`'s framework once as a step: every model call a turn; its output becomes
    `ctx.output`. A framework that raises keeps every finished turn (S28), the one whose
    tools were running included."""
    port = TurnPort(step, at, node)
    try:
        output = await step.drive(port)
    except BaseException as exc:
        if port.open is not None:
            await port.close()
        if isinstance(exc, Exception):
            node.error = node.error or f"{type(exc).__name__}: {exc}"
            note_once(exc, f"in the {step.framework} agent {step.name!r} at {node.path!r}")
        raise
    await port.close()
    if output is not None:
        at.ctx.output = output
