"""The observer that turns what the engine reports into OpenTelemetry spans.

The parent of every span is explicit: where a line of execution stands is kept in a
`ContextVar` (`_here`) holding the OpenTelemetry context of the innermost open span. Each
parallel branch runs as a task with its own copy of the context, so branches never see each
other's turns, and a turn's model attempts and tools always find their turn.

The tree: `invoke_workflow {workflow}` → `thena.loop {path}` (nested loops nest) →
`invoke_agent {agent}` → `chat {model}` (one per attempt) and `execute_tool {tool}`.
"""

from __future__ import annotations

import math
from contextlib import suppress
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from thena_nb.core.engine._observe import Observer
from thena_nb.core.engine._run_state import LoopFrame, Position
from thena_nb.core.parts.agent import Agent
from thena_nb.core.records.model import Model, ModelRequest, Reply
from thena_nb.core.records.report import ReportNode
from thena_nb.core.records.types import ToolCall, Turn
from thena_nb.core.runs.run import Run
from thena_nb.telemetry import _attributes as attrs

__all__ = ["SpanObserver"]


@dataclass(eq=False)
class _Open:
    """One span that has started and not yet ended, and the spans opened under it."""

    owner: Any  # the run, loop frame, report node or call the span is for (kept alive)
    span: Span
    parent: _Open | None
    token: Token[_Here | None] | None = None
    children: list[_Open] = field(default_factory=list)
    attempts: int = 0  # turn spans: the model attempts made so far
    model: dict[str, Any] = field(default_factory=dict)  # turn spans: the model's attributes


@dataclass(frozen=True, eq=False)
class _Here:
    context: Context
    entry: _Open


_here: ContextVar[_Here | None] = ContextVar("thena_nb.telemetry.here", default=None)


class SpanObserver(Observer):
    """Reports runs, loops, turns, model attempts and tool calls as spans to `tracer`."""

    def __init__(self, tracer: Tracer, *, capture_content: bool) -> None:
        self.tracer = tracer
        self.capture_content = capture_content
        self._open: dict[int, _Open] = {}

    # -- opening and closing -----------------------------------------------------------

    def _start(self, owner: Any, name: str, kind: SpanKind, attributes: dict[str, Any]) -> _Open:
        here = _here.get()
        parent_ctx = here.context if here is not None else None
        span = self.tracer.start_span(name, context=parent_ctx, kind=kind, attributes=attributes)
        parent = here.entry if here is not None else None
        entry = _Open(owner, span, parent)
        if parent is not None:
            parent.children.append(entry)
        entry.token = _here.set(_Here(trace.set_span_in_context(span, parent_ctx), entry))
        self._open[id(owner)] = entry
        return entry

    def _take(self, owner: Any) -> _Open | None:
        """The open entry of `owner`, no longer current; `None` if it never opened (e.g.
        instrumented in the middle of a run)."""
        entry = self._open.pop(id(owner), None)
        if entry is None:
            return None
        self._close_children(entry)  # first: their tokens restore what this one set
        if entry.token is not None:
            with suppress(ValueError):  # opened in another task's context: not ours to reset
                _here.reset(entry.token)
        if entry.parent is not None and entry in entry.parent.children:
            entry.parent.children.remove(entry)
        return entry

    def _close_children(self, entry: _Open) -> None:
        """End what is still open under `entry` (a branch cancelled mid-turn): those spans
        end with the parent, marked `_OTHER`."""
        for child in list(entry.children):
            taken = self._take(child.owner)
            if taken is not None:
                _fail(taken.span, "_OTHER")
                taken.span.end()

    def close_all(self) -> None:
        """End every span still open (when instrumentation is removed)."""
        while self._open:
            entry = next(iter(self._open.values()))
            taken = self._take(entry.owner)
            if taken is not None:
                taken.span.end()

    # -- the run ---------------------------------------------------------------------

    def run_started(self, run: Run) -> None:
        attributes = {
            "gen_ai.operation.name": "invoke_workflow",
            "gen_ai.workflow.name": run.workflow_name,
            "gen_ai.conversation.id": run.run_id,
        }
        name = f"invoke_workflow {run.workflow_name}"
        self._start(run, name, SpanKind.INTERNAL, attributes)

    def run_finished(self, run: Run, exc: BaseException | None) -> None:
        entry = self._take(run)
        if entry is None:
            return
        span = entry.span
        span.set_attribute("thena.run.status", str(run.status))
        usage = run.usage
        span.set_attribute("thena.run.model_calls", usage.model_calls)
        span.set_attribute("thena.run.tool_calls", usage.tool_calls)
        if exc is not None:
            _fail(span, attrs.error_type(exc))
        span.end()

    # -- loops -----------------------------------------------------------------------

    def loop_started(self, frame: LoopFrame) -> None:
        step = frame.step
        attributes: dict[str, Any] = {
            "thena.step.path": frame.path,
            "thena.loop.max_iterations": step.max_iterations,
        }
        if not math.isinf(step.max_fails):
            attributes["thena.loop.max_fails"] = int(step.max_fails)
        self._start(frame, f"thena.loop {frame.path}", SpanKind.INTERNAL, attributes)

    def loop_finished(self, frame: LoopFrame) -> None:
        entry = self._take(frame)
        if entry is None:
            return
        span, node = entry.span, frame.node
        span.set_attribute("thena.loop.iterations", node.iterations)
        span.set_attribute("thena.loop.failures.total", frame.total)
        if node.stop_reason is not None:
            span.set_attribute("thena.loop.stop_reason", node.stop_reason)
        elif node.error:
            _fail(span, node.error.split(":", 1)[0])
        span.end()

    # -- turns -----------------------------------------------------------------------

    def turn_started(
        self, agent: Agent, at: Position, node: ReportNode, recorded: Turn | None
    ) -> None:
        model = agent.model
        provider = attrs.provider_of(model)
        request_model = getattr(model, "name", "") or type(model).__name__
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": provider,
            "gen_ai.agent.name": agent.name,
            "gen_ai.conversation.id": at.control.run.run_id,
            "gen_ai.request.model": request_model,
            "thena.step.path": node.path,
            "thena.turn.replayed": recorded is not None,
        }
        entry = self._start(node, f"invoke_agent {agent.name}", SpanKind.INTERNAL, attributes)
        entry.model = {"gen_ai.provider.name": provider, "gen_ai.request.model": request_model}
        server = attrs.server_of(model, provider)
        if server is not None:
            entry.model["server.address"], entry.model["server.port"] = server

    def turn_finished(self, node: ReportNode, turn: Turn) -> None:
        entry = self._take(node)
        if entry is None:
            return
        ended: dict[str, Any] = _usage(turn, entry.model.get("gen_ai.provider.name"))
        ended["gen_ai.response.finish_reasons"] = [turn.finish_reason]
        ended["thena.turn.attempts"] = turn.attempts
        ended["thena.turn.consecutive_fails"] = turn.consecutive_fails
        if any(c.ok is False for c in turn.tool_calls):
            ended["thena.turn.tool_error"] = True
        entry.span.set_attributes(ended)
        entry.span.end()

    def turn_failed(self, node: ReportNode, exc: BaseException) -> None:
        entry = self._take(node)
        if entry is None:
            return
        _fail(entry.span, attrs.error_type(exc))
        entry.span.end()

    # -- model attempts --------------------------------------------------------------

    def attempt_started(self, model: Model, sent: ModelRequest) -> Any:
        here = _here.get()
        turn = here.entry if here is not None else None
        if turn is not None and turn.model:
            base = dict(turn.model)
        else:
            provider = attrs.provider_of(model)
            base = {"gen_ai.provider.name": provider, "gen_ai.request.model": model.name}
            server = attrs.server_of(model, provider)
            if server is not None:
                base["server.address"], base["server.port"] = server
        attempt = 1
        if turn is not None:
            turn.attempts += 1
            attempt = turn.attempts
        attributes = {
            "gen_ai.operation.name": "chat",
            **base,
            "gen_ai.request.max_tokens": sent.max_tokens,
            "thena.turn.attempt": attempt,
        }
        if self.capture_content:
            system = attrs.system_instructions(sent)
            if system is not None:
                attributes["gen_ai.system_instructions"] = system
            attributes["gen_ai.input.messages"] = attrs.input_messages(sent.messages)
        name = f"chat {base['gen_ai.request.model']}"
        parent_ctx = here.context if here is not None else None
        span = self.tracer.start_span(
            name, context=parent_ctx, kind=SpanKind.CLIENT, attributes=attributes
        )
        return span, base["gen_ai.request.model"], base["gen_ai.provider.name"]

    def attempt_finished(self, handle: Any, reply: Reply) -> None:
        span, _, provider = handle
        finish = reply.finish_reason or ("tool_use" if reply.tool_calls else "end_turn")
        ended: dict[str, Any] = _usage(reply, provider)
        if reply.response_model:  # the model that answered; the one asked is the request's
            ended["gen_ai.response.model"] = reply.response_model
        if reply.response_id:
            ended["gen_ai.response.id"] = reply.response_id
        ended["gen_ai.response.finish_reasons"] = [finish]
        if self.capture_content:
            ended["gen_ai.output.messages"] = attrs.output_messages(reply, finish)
        span.set_attributes(ended)
        span.end()

    def attempt_failed(self, handle: Any, exc: BaseException) -> None:
        span = handle[0]
        _fail(span, attrs.error_type(exc))
        span.end()

    # -- tool calls ------------------------------------------------------------------

    def tool_started(self, agent: Agent, call: ToolCall) -> None:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
            "thena.tool_call.source": call.source,
        }
        tool = agent._by_name.get(call.name)
        if tool is not None and tool.description:
            attributes["gen_ai.tool.description"] = tool.description
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = attrs.dump_arguments(call.arguments)
        self._start(call, f"execute_tool {call.name}", SpanKind.INTERNAL, attributes)

    def tool_finished(self, call: ToolCall, done: ToolCall) -> None:
        entry = self._take(call)
        if entry is None:
            return
        span = entry.span
        if done.decision is not None:
            span.set_attribute("thena.tool_call.decision", done.decision)
        span.set_attribute("thena.tool_call.retries", done.retries)
        if done.result_cut:
            span.set_attribute("thena.tool_call.result_cut", done.result_cut)
        if self.capture_content:
            text = done.result if done.ok else done.error
            if text is not None:
                span.set_attribute("gen_ai.tool.call.result", text)
        if not done.ok:
            _fail(span, attrs.tool_error_type(done))
        span.end()


def _usage(source: Reply | Turn, provider: Any) -> dict[str, Any]:
    """Token counts by their convention names. `gen_ai.usage.input_tokens` includes cached
    tokens: the Messages API counts them apart, so they are added for `anthropic`; the
    chat completions API includes them in `prompt_tokens` already."""
    cached = source.cache_read_tokens + source.cache_write_tokens
    extra = cached if provider == "anthropic" else 0
    return {
        "gen_ai.usage.input_tokens": source.input_tokens + extra,
        "gen_ai.usage.output_tokens": source.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": source.cache_read_tokens,
        "gen_ai.usage.cache_creation.input_tokens": source.cache_write_tokens,
    }


def _fail(span: Span, kind: str) -> None:
    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR, kind))
