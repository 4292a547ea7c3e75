"""`Agent`: running an agent as a step is exactly one turn — one model call, then every
tool call it made, in order (S27)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from thena_nb.core._signals import Halt, LoopBreak, note_once
from thena_nb.core.errors import TransientModelError
from thena_nb.core.history import HistoryProcessor
from thena_nb.core.model import Model, ModelRequest, Reply, ToolSpec
from thena_nb.core.tools import Tool, error_observation, run_tool_call, tool
from thena_nb.core.types import (
    HistoryView,
    LoopFailure,
    Message,
    ToolCall,
    Turn,
    TurnInfo,
    construct,
)
from thena_nb.core.types import finished as finished_call

if TYPE_CHECKING:
    from thena_nb.core.context import Context, LoopFrame
    from thena_nb.core.report import ReportNode

__all__ = ["Agent"]


class Agent:
    """An LLM agent: a model, a system prompt and tools. As a step it takes one turn.

    Args:
        name: Unique within its workflow; used in step paths and to attribute its messages.
        model: Any `Model` (`ScriptedModel`, `AnthropicModel`, ...).
        system: The system prompt.
        tools: `@tool` functions (plain functions are wrapped with `@tool`).
        output_field: Also write the turn's text to this field of the workflow state.
        rescue: Look for tool calls written as text when the model made no native call.
        max_tokens: The model's output limit per turn.
        history: A history processor, e.g. `keep_first_and_recent(20)`.
        parallel_tools: Run one turn's tool calls concurrently (results still go back in
            call order).

    Example:
        >>> from thena_nb import Agent, tool
        >>> from thena_nb.models import ScriptedModel, reply
        >>> @tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two numbers.'''
        ...     return a + b
        >>> calc = Agent("Calc", model=ScriptedModel([reply.tool("add", a=1, b=2), "3"]),
        ...              tools=[add])
        >>> calc
        Agent('Calc', model='scripted', tools=['add'])
    """

    kind = "agent"

    def __init__(
        self,
        name: str,
        *,
        model: Model,
        system: str = "",
        tools: Iterable[Tool | Callable[..., Any]] = (),
        output_field: str | None = None,
        rescue: bool = True,
        max_tokens: int = 1024,
        history: HistoryProcessor | None = None,
        parallel_tools: bool = False,
    ) -> None:
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"agent name must be a non-empty string without '/', got {name!r}")
        self.name = name
        self.model = model
        self.system = system
        self.tools: list[Tool] = [t if isinstance(t, Tool) else tool(t) for t in tools]
        names = [t.name for t in self.tools]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"agent {name!r} has two tools named {dupes[0]!r}; rename one")
        self.output_field = output_field
        self.rescue = rescue
        self.max_tokens = max_tokens
        self.history = history
        self.parallel_tools = parallel_tools
        self._by_name = {t.name: t for t in self.tools}
        self._specs: list[ToolSpec] = [t.spec for t in self.tools]
        self._key: str | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name != "_key":
            object.__setattr__(self, "_key", None)  # a changed agent asks something new

    @property
    def key(self) -> str:
        """A fingerprint of the agent's model, prompt and tools (part of each request key)."""
        if self._key is None:
            from thena_nb.core.replay import agent_key

            self._key = agent_key(self)
        return self._key

    def replace(self, **changes: Any) -> Agent:
        """A copy of this agent with some fields replaced (used by fork and experiments).

        Example:
            >>> from thena_nb import Agent
            >>> from thena_nb.models import ScriptedModel
            >>> agent = Agent("Executor", model=ScriptedModel(["ok"]), system="Be thorough.")
            >>> agent.replace(system="Be brief.").system
            'Be brief.'
        """
        fields = dict(
            model=self.model,
            system=self.system,
            tools=self.tools,
            output_field=self.output_field,
            rescue=self.rescue,
            max_tokens=self.max_tokens,
            history=self.history,
            parallel_tools=self.parallel_tools,
        )
        unknown = set(changes) - set(fields) - {"name"}
        if unknown:
            raise ValueError(
                f"agent {self.name!r} has no field {sorted(unknown)[0]!r}; "
                f"changeable fields: {', '.join(sorted(fields))}"
            )
        fields.update(changes)
        name = changes.pop("name", self.name)
        fields.pop("name", None)
        return Agent(name, **fields)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        parts = [
            repr(self.name),
            f"model={getattr(self.model, 'name', type(self.model).__name__)!r}",
        ]
        if self.tools:
            parts.append(f"tools={[t.name for t in self.tools]!r}")
        return f"Agent({', '.join(parts)})"


async def take_turn(agent: Agent, ctx: Context, node: ReportNode) -> Turn:
    """Run one turn of `agent`: the model call phase, then the tool call phase."""
    control = ctx._control
    scope = ctx._scope
    if control.checkpoint is not None and scope.branch is None:
        await control.checkpoint()
    # Stop first, then budget: both are checked before every model call.
    if control.stop_requested:
        raise Halt("stop")
    if control.budget is not None:
        spent = control.budget.spent(control.run.usage)
        if spent is not None:
            raise Halt("budget", spent)

    index = len(scope.turns)
    path = node.path
    history = scope.history
    request_key = scope.hasher.request_key(history, agent.key)
    recorded = (
        control.replay.lookup(index, path, request_key, in_branch=scope.branch is not None)
        if control.replay
        else None
    )
    started_at = datetime.now(UTC)
    t0 = time.perf_counter()
    try:
        if recorded is None:
            reply, attempts = await _model_phase(agent, ctx, path)
        else:
            reply, attempts = _recorded_reply(recorded), 0
            # Usage describes the run's content, so a replay reproduces budget stops exactly;
            # `turn.replayed` (and `attempts == 0`) tells that no call was made.
            control.run.usage.__dict__["model_calls"] += 1
    except Exception as exc:
        node.error = f"{type(exc).__name__}: {exc}"
        note_once(exc, f"in turn {index} of agent {agent.name!r} at {path!r}")
        raise
    # Usage is a running tally the executor owns; bypass pydantic's per-field __setattr__.
    tally = control.run.usage.__dict__
    if reply.input_tokens or reply.output_tokens:
        tally["input_tokens"] += reply.input_tokens
        tally["output_tokens"] += reply.output_tokens
    if reply.cache_read_tokens or reply.cache_write_tokens:
        tally["cache_read_tokens"] += reply.cache_read_tokens
        tally["cache_write_tokens"] += reply.cache_write_tokens

    calls = _calls_of(agent, reply, request_key)
    history.append(
        construct(
            Message,
            {
                "role": "assistant",
                "content": reply.text,
                "agent": agent.name,
                "tool_calls": calls,
                "tool_call_id": None,
                "is_error": False,
            },
        )
    )
    if not calls:
        finished: list[ToolCall] = []
    elif recorded is not None and not control.replay.rerun_tools:  # type: ignore[union-attr]
        finished = _recorded_results(calls, recorded)
    else:
        finished = await _run_tools(agent, calls, ctx)
    tally["tool_calls"] += len(finished)
    for call in finished:
        history.append(
            construct(
                Message,
                {
                    "role": "tool",
                    "content": (call.result if call.ok else call.error) or "",
                    "agent": agent.name,
                    "tool_calls": [],
                    "tool_call_id": call.id,
                    "is_error": not call.ok,
                },
            )
        )
    if recorded is not None:
        _restore_state(ctx, control.replay.state_after(index))  # type: ignore[union-attr]

    loops = ctx._loops
    failures = _count_failures(loops, finished)
    info = _turn_info(reply.text, finished)
    inner = loops[-1] if loops else None
    turn = construct(
        Turn,
        {
            "index": index,
            "step_path": path,
            "agent": agent.name,
            "model": getattr(agent.model, "name", ""),
            "iteration": inner.iteration if inner else None,
            "branch": scope.branch,
            "info": info,
            "tool_calls": finished,
            "finish_reason": reply.finish_reason
            or ("tool_use" if reply.tool_calls else "end_turn"),
            "input_tokens": reply.input_tokens,
            "output_tokens": reply.output_tokens,
            "cache_read_tokens": reply.cache_read_tokens,
            "cache_write_tokens": reply.cache_write_tokens,
            "attempts": attempts,
            "consecutive_fails": inner.consecutive if inner else 0,
            "started_at": started_at,
            "duration_s": time.perf_counter() - t0,
            "request_key": request_key,
            "replayed": recorded is not None,
            "reasoning": reply.reasoning,
            "reasoning_tokens": reply.reasoning_tokens,
        },
    )
    ctx.turn = info
    ctx.output = reply.text
    if agent.output_field is not None:
        _write_state(ctx, agent.output_field, reply.text, agent.name)
    # S28: the turn is recorded (and persisted) before the next one can start.
    scope.turns.append(turn)
    node.turns.append(index)
    for frame in loops:
        frame.turns.append(turn)
        frame.tool_calls += len(finished)
    if scope.branch is None:
        await control.record(turn, ctx.state)

    for frame, failure in failures:
        on_fail = frame.step.on_fail
        if on_fail is not None:
            try:
                on_fail(ctx, failure)
            except Exception as exc:
                note_once(exc, f"in `on_fail` of loop {frame.path!r}")
                raise
    # `fails` is checked after every turn; the outermost loop that reached its limit stops.
    for frame in loops:
        if frame.consecutive >= frame.step.max_fails:
            raise LoopBreak(frame, "fails")
    return turn


async def _model_phase(agent: Agent, ctx: Context, path: str) -> tuple[Reply, int]:
    control = ctx._control
    messages: Sequence[Message] = HistoryView(ctx._scope.history)
    if agent.history is not None:
        messages = agent.history(messages)
    on_delta = None
    if control.subscribers:
        from thena_nb.core.session import event

        control.emit(event("turn_started", path=path, agent=agent.name))

        def on_delta(text: str) -> None:
            control.emit(event("text_delta", path=path, agent=agent.name, text=text))

    request = construct(
        ModelRequest,
        {
            "agent": agent.name,
            "system": agent.system,
            "messages": messages,
            "tools": agent._specs,
            "max_tokens": agent.max_tokens,
            "on_text_delta": on_delta,
        },
    )
    return await _call_model(agent.model, request, control)


def _turn_info(text: str, finished: list[ToolCall]) -> TurnInfo:
    if finished:
        last = finished[-1]
        return construct(
            TurnInfo,
            {
                "called_tool": True,
                "tool_name": last.name,
                "tool_error": not all(c.ok for c in finished),
                "tool_call_source": last.source,
                "response": text,
            },
        )
    return construct(
        TurnInfo,
        {
            "called_tool": False,
            "tool_name": None,
            "tool_error": None,
            "tool_call_source": None,
            "response": text,
        },
    )


def _recorded_reply(turn: Turn) -> Reply:
    """The reply a recorded turn got, rebuilt so the turn replays exactly."""
    native = [
        finished_call(c, ok=None, result=None, error=None, retries=0)
        for c in turn.tool_calls
        if c.source == "native"
    ]
    return Reply(
        text=turn.info.response,
        tool_calls=native,
        finish_reason=turn.finish_reason,
        input_tokens=turn.input_tokens,
        output_tokens=turn.output_tokens,
        cache_read_tokens=turn.cache_read_tokens,
        cache_write_tokens=turn.cache_write_tokens,
        reasoning=turn.reasoning,
        reasoning_tokens=turn.reasoning_tokens,
    )


def _recorded_results(calls: list[ToolCall], turn: Turn) -> list[ToolCall]:
    by_id = {c.id: c for c in turn.tool_calls}
    out = []
    for call in calls:
        if call.ok is not None:
            out.append(call)  # refused before it could run: the same now as then
        else:
            done = by_id.get(call.id)
            assert done is not None, f"recorded turn {turn.index} has no result for {call.id}"
            out.append(done)
    return out


def _restore_state(ctx: Context, snapshot: Any) -> None:
    state = ctx.state
    if snapshot is None or state is None:
        return
    if isinstance(state, dict):
        state.clear()
        state.update(snapshot)
        return
    restored = type(state).model_validate(snapshot)
    state.__dict__.update(restored.__dict__)


async def _call_model(model: Model, request: ModelRequest, control: Any) -> tuple[Reply, int]:
    """One model call with the executor's retries (S25); returns the reply and attempts."""
    policy = control.retry
    tally = control.run.usage.__dict__
    attempt = 0
    while True:
        attempt += 1
        tally["model_calls"] += 1
        try:
            return await model.respond(request), attempt
        except TransientModelError as exc:
            if attempt > policy.max_retries:
                exc.add_note(f"gave up after {attempt} attempts")
                raise
            delay = policy.delay(attempt, exc.retry_after, random.random())
            await asyncio.sleep(delay)


def _calls_of(agent: Agent, reply: Reply, request_key: str) -> list[ToolCall]:
    """The turn's calls: native ones, or else those rescued from the text (S21)."""
    if reply.tool_calls:
        return list(reply.tool_calls)
    if not agent.rescue or not agent.tools or not reply.text:
        return []
    from thena_nb.core.rescue import scan_tool_calls

    # Ids come from the request key and the call's position: a replay asks the same and
    # gets the same ids, whatever order parallel branches' model calls return in.
    scan = scan_tool_calls(reply.text, agent.tools, id_prefix=f"rescued-{request_key[:12]}")
    calls = list(scan.calls)
    for call in scan.refused:
        error = error_observation(call.name, call.arguments, reason=call.error)
        calls.append(finished_call(call, error=error))
    return calls


async def _run_tools(agent: Agent, calls: list[ToolCall], ctx: Context) -> list[ToolCall]:
    control = ctx._control
    emit = bool(control.subscribers)
    if agent.parallel_tools and len(calls) > 1:
        # S27: concurrent, but the results keep the order the model gave.
        return list(await asyncio.gather(*(_run_one(agent, c, ctx, emit) for c in calls)))
    return [await _run_one(agent, c, ctx, emit) for c in calls]


async def _run_one(agent: Agent, call: ToolCall, ctx: Context, emit: bool) -> ToolCall:
    if call.ok is not None:
        return call  # refused before it could run
    if emit:
        from thena_nb.core.session import event

        ctx._control.emit(event("tool_started", agent=agent.name, tool_call=call))
    done = await run_tool_call(call, agent._by_name, ctx)
    if emit:
        ctx._control.emit(event("tool_finished", agent=agent.name, tool_call=done))
    return done


def _count_failures(
    loops: list[LoopFrame], finished: list[ToolCall]
) -> list[tuple[LoopFrame, LoopFailure]]:
    """Update every open loop's streak (S10) and return the failures for `on_fail` (S11)."""
    out: list[tuple[LoopFrame, LoopFailure]] = []
    if not loops:
        return out
    for call in finished:
        for frame in loops:
            if call.ok:
                frame.consecutive = 0
                continue
            frame.consecutive += 1
            frame.total += 1
            failure = construct(
                LoopFailure,
                {
                    "consecutive": frame.consecutive,
                    "total": frame.total,
                    "tool_name": call.name,
                    "message": call.error or "",
                },
            )
            frame.node.__dict__["failures"] = failure
            out.append((frame, failure))
    return out


def _write_state(ctx: Context, field: str, value: str, agent: str) -> None:
    state = ctx.state
    if state is None:
        raise AttributeError(
            f"agent {agent!r} has `output_field={field!r}` but the workflow has no `state=`"
        )
    if isinstance(state, dict):
        state[field] = value
    else:
        setattr(state, field, value)
