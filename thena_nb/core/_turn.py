"""One turn, as named phases: gate → request → model → calls → tools → record.

Running an agent as a step is exactly one turn (S27): one model call, then every tool call
it made, in the order the model gave them. Each phase below is one function, in the order a
turn runs and the order SEMANTICS states the rules:

- `gate`: the session's pause point before the model call; then `stop`, then `budget`.
- `request`: the `ModelRequest`, exactly what the model is sent (after the agent's history
  processor), and its request key.
- `model`: the call with the executor's retries (S25), or the recorded reply on replay.
- `calls`: the native calls, or those rescued from the text (S21); ids assigned once.
- `tools`: the second pause point, before any tool of the turn runs; then the calls.
- `record`: the `Turn`, recorded (and persisted) before the next turn starts (S28); then
  `on_fail` for each failed call (S11) and the `fails` check (S10).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from thena_nb.core._run_state import LoopFrame, Position, RunControl
from thena_nb.core._signals import Halt, LoopBreak, note_once
from thena_nb.core.agent import Agent
from thena_nb.core.errors import TransientModelError
from thena_nb.core.events import event
from thena_nb.core.model import Model, ModelRequest, Reply
from thena_nb.core.report import ReportNode
from thena_nb.core.rescue import scan_tool_calls
from thena_nb.core.tools import error_observation, run_tool_call
from thena_nb.core.types import (
    HistoryView,
    LoopFailure,
    Message,
    ToolCall,
    Turn,
    TurnInfo,
    construct,
    finished,
)

__all__ = ["take_turn"]


@dataclass(slots=True)
class _Asked:
    """What the request phase settled: the key of the request, and the recorded turn a
    replay serves for it (`None` when the turn goes live)."""

    key: str
    recorded: Turn | None


async def take_turn(agent: Agent, at: Position, node: ReportNode) -> Turn:
    """Run one turn of `agent` at `at`, under the report node `node`."""
    await gate(at)
    asked = request(agent, at, node.path)
    started_at, t0 = datetime.now(UTC), time.perf_counter()
    try:
        reply, attempts = await model(agent, at, node.path, asked)
    except Exception as exc:
        node.error = f"{type(exc).__name__}: {exc}"
        note_once(exc, f"in turn {len(at.scope.turns)} of agent {agent.name!r} at {node.path!r}")
        raise
    history = at.scope.history
    first = len(history)
    proposed = calls(agent, reply, asked.key)
    history.append(_assistant_message(agent.name, reply.text, proposed))
    done = await tools(agent, at, proposed, asked.recorded)
    at.control.run.usage.__dict__["tool_calls"] += len(done)  # failed calls count too
    for call in done:
        history.append(_tool_message(agent.name, call))
    if asked.recorded is not None and at.control.replay is not None:
        _restore_state(at.ctx.state, at.control.replay.state_after(len(at.scope.turns)))
    timing = (started_at, time.perf_counter() - t0, attempts)
    return await record(agent, at, node, asked, reply, done, timing, history[first:])


# -- gate ------------------------------------------------------------------------------------


async def gate(at: Position) -> None:
    """The pause point before a model call; then stop first, then budget (both are checked
    before every model call)."""
    control = at.control
    if control.checkpoint is not None and at.top_level:
        await control.checkpoint("model")
    if control.stop_requested:
        raise Halt("stop")
    if control.budget is not None:
        spent = control.budget.spent(control.run.usage)
        if spent is not None:
            raise Halt("budget", spent)


# -- request ---------------------------------------------------------------------------------


def request(agent: Agent, at: Position, path: str) -> _Asked:
    """The request's key from the history as it stands, and what a replay serves for it."""
    scope = at.scope
    key = scope.hasher.request_key(scope.history, agent.key)
    replay = at.control.replay
    recorded = None
    if replay is not None:
        recorded = replay.lookup(len(scope.turns), path, key, in_branch=not at.top_level)
    return _Asked(key, recorded)


def model_request(
    agent: Agent, history: Sequence[Message], on_text_delta: Callable[[str], None] | None
) -> ModelRequest:
    """Exactly what the model is sent: the agent's prompt, tools and limit, and the history
    after its history processor."""
    messages: Sequence[Message] = HistoryView(history)
    if agent.history is not None:
        messages = agent.history(messages)
    return construct(
        ModelRequest,
        {
            "agent": agent.name,
            "system": agent.system,
            "messages": messages,
            "tools": agent._specs,
            "max_tokens": agent.max_tokens,
            "on_text_delta": on_text_delta,
        },
    )


# -- model -----------------------------------------------------------------------------------


async def model(agent: Agent, at: Position, path: str, asked: _Asked) -> tuple[Reply, int]:
    """The model's reply and the attempts it took; a recorded reply costs no call."""
    control = at.control
    usage = control.run.usage
    if asked.recorded is not None:
        # Usage describes the run's content, so a replay reproduces budget stops exactly;
        # `turn.replayed` (and `attempts == 0`) tells that no call was made.
        usage.__dict__["model_calls"] += 1
        reply, attempts = _recorded_reply(asked.recorded), 0
    else:
        on_delta = _announce(control, path, agent.name) if control.subscribers else None
        sent = model_request(agent, at.scope.history, on_delta)
        reply, attempts = await call_model(agent.model, sent, control)
    usage.add(reply)
    return reply, attempts


def _announce(control: RunControl, path: str, agent: str) -> Callable[[str], None]:
    """Tell listeners the turn started; the callback that tells them each piece of text."""
    control.emit(event("turn_started", path=path, agent=agent))

    def on_delta(text: str) -> None:
        control.emit(event("text_delta", path=path, agent=agent, text=text))

    return on_delta


async def call_model(model: Model, sent: ModelRequest, control: RunControl) -> tuple[Reply, int]:
    """One model call with the executor's retries (S25); returns the reply and attempts."""
    policy = control.retry
    tally = control.run.usage.__dict__
    attempt = 0
    while True:
        attempt += 1
        tally["model_calls"] += 1  # every attempt is a model call
        try:
            return await model.respond(sent), attempt
        except TransientModelError as exc:
            if attempt > policy.max_retries:
                exc.add_note(f"gave up after {attempt} attempts")
                raise
            await asyncio.sleep(policy.delay(attempt, exc.retry_after, random.random()))


def _recorded_reply(turn: Turn) -> Reply:
    """The reply a recorded turn got, rebuilt so the turn replays exactly."""
    native = [
        finished(c, ok=None, result=None, error=None, retries=0)
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


# -- calls -----------------------------------------------------------------------------------


def calls(agent: Agent, reply: Reply, request_key: str) -> list[ToolCall]:
    """The turn's calls: native ones, or else those rescued from the text (S21).

    A rescued call's id comes from the request key and the call's position in the text, so
    a replay, which asks the same, gets the same ids whatever order parallel branches'
    model calls return in. A call to a `@tool(rescue=False)` tool is a failed call.
    """
    if reply.tool_calls:
        return list(reply.tool_calls)
    if not agent.rescue or not agent.tools or not reply.text:
        return []
    scan = scan_tool_calls(reply.text, agent.tools, id_prefix=f"rescued-{request_key[:12]}")
    out = list(scan.calls)
    for call in scan.refused:
        error = error_observation(call.name, call.arguments, reason=call.error)
        out.append(finished(call, error=error))
    return out


# -- tools -----------------------------------------------------------------------------------


async def tools(
    agent: Agent, at: Position, proposed: list[ToolCall], recorded: Turn | None
) -> list[ToolCall]:
    """The calls with their outcomes, in call order (S27): recorded ones on replay, else run
    after the pause point before tools."""
    if not proposed:
        return []
    control = at.control
    if recorded is not None and control.replay is not None and not control.replay.rerun_tools:
        return _recorded_results(proposed, recorded)
    if control.pause_before_tools and control.checkpoint is not None and at.top_level:
        await control.checkpoint("tools")
    emit = bool(control.subscribers)
    if agent.parallel_tools and len(proposed) > 1:
        # S27: concurrent, but the results keep the order the model gave.
        return list(await asyncio.gather(*(_run_one(agent, c, at, emit) for c in proposed)))
    return [await _run_one(agent, c, at, emit) for c in proposed]


def _recorded_results(proposed: list[ToolCall], turn: Turn) -> list[ToolCall]:
    by_id = {c.id: c for c in turn.tool_calls}
    out = []
    for call in proposed:
        if call.ok is not None:
            out.append(call)  # refused before it could run: the same now as then
        else:
            done = by_id.get(call.id)
            assert done is not None, f"recorded turn {turn.index} has no result for {call.id}"
            out.append(done)
    return out


async def _run_one(agent: Agent, call: ToolCall, at: Position, emit: bool) -> ToolCall:
    if call.ok is not None:
        return call  # refused before it could run
    control = at.control
    if emit:
        control.emit(event("tool_started", agent=agent.name, tool_call=call))
    done = await run_tool_call(call, agent._by_name, at.ctx)
    if emit:
        control.emit(event("tool_finished", agent=agent.name, tool_call=done))
    return done


# -- record ----------------------------------------------------------------------------------


async def record(
    agent: Agent,
    at: Position,
    node: ReportNode,
    asked: _Asked,
    reply: Reply,
    done: list[ToolCall],
    timing: tuple[datetime, float, int],
    added: Sequence[Message],
) -> Turn:
    """Build the `Turn`, record it before the next turn can start (S28), then run `on_fail`
    for each failed call (S11) and check `fails` (S10)."""
    loops = at.loops
    failures = _count_failures(loops, done)
    turn = _turn(agent, at, node.path, asked, reply, done, timing)
    ctx = at.ctx
    ctx.turn = turn.info
    ctx.output = reply.text
    if agent.output_field is not None:
        _write_state(ctx.state, agent.output_field, reply.text, agent.name)
    at.scope.turns.append(turn)
    node.turns.append(turn.index)
    for frame in loops:
        frame.turns.append(turn)
        frame.tool_calls += len(done)
    if at.top_level:
        await at.control.record(turn, ctx.state, added)
    else:
        at.scope.added.append(added)  # recorded when the parallel block merges
    _after_turn(at, failures)
    return turn


def _turn(
    agent: Agent,
    at: Position,
    path: str,
    asked: _Asked,
    reply: Reply,
    done: list[ToolCall],
    timing: tuple[datetime, float, int],
) -> Turn:
    inner = at.loops[-1] if at.loops else None
    started_at, duration_s, attempts = timing
    return construct(
        Turn,
        {
            "index": len(at.scope.turns),
            "step_path": path,
            "agent": agent.name,
            "model": getattr(agent.model, "name", ""),
            "iteration": inner.iteration if inner else None,
            "branch": at.scope.branch,
            "info": _turn_info(reply.text, done),
            "tool_calls": done,
            "finish_reason": reply.finish_reason
            or ("tool_use" if reply.tool_calls else "end_turn"),
            "input_tokens": reply.input_tokens,
            "output_tokens": reply.output_tokens,
            "cache_read_tokens": reply.cache_read_tokens,
            "cache_write_tokens": reply.cache_write_tokens,
            "attempts": attempts,
            "consecutive_fails": inner.consecutive if inner else 0,
            "started_at": started_at,
            "duration_s": duration_s,
            "request_key": asked.key,
            "replayed": asked.recorded is not None,
            "reasoning": reply.reasoning,
            "reasoning_tokens": reply.reasoning_tokens,
        },
    )


def _after_turn(at: Position, failures: list[tuple[LoopFrame, LoopFailure]]) -> None:
    for frame, failure in failures:
        on_fail = frame.step.on_fail
        if on_fail is not None:
            try:
                on_fail(at.ctx, failure)
            except Exception as exc:
                note_once(exc, f"in `on_fail` of loop {frame.path!r}")
                raise
    # `fails` is checked after every turn; the outermost loop that reached its limit stops.
    for frame in at.loops:
        if frame.consecutive >= frame.step.max_fails:
            raise LoopBreak(frame, "fails")


def _turn_info(text: str, done: list[ToolCall]) -> TurnInfo:
    if not done:
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
    last = done[-1]
    return construct(
        TurnInfo,
        {
            "called_tool": True,
            "tool_name": last.name,
            "tool_error": not all(c.ok for c in done),
            "tool_call_source": last.source,
            "response": text,
        },
    )


def _count_failures(
    loops: list[LoopFrame], done: list[ToolCall]
) -> list[tuple[LoopFrame, LoopFailure]]:
    """Update every open loop's streak (S10) and return the failures for `on_fail` (S11)."""
    out: list[tuple[LoopFrame, LoopFailure]] = []
    if not loops:
        return out
    for call in done:
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


# -- messages and state ----------------------------------------------------------------------


def _assistant_message(agent: str, text: str, proposed: list[ToolCall]) -> Message:
    return construct(
        Message,
        {
            "role": "assistant",
            "content": text,
            "agent": agent,
            "tool_calls": proposed,
            "tool_call_id": None,
            "is_error": False,
        },
    )


def _tool_message(agent: str, call: ToolCall) -> Message:
    return construct(
        Message,
        {
            "role": "tool",
            "content": (call.result if call.ok else call.error) or "",
            "agent": agent,
            "tool_calls": [],
            "tool_call_id": call.id,
            "is_error": not call.ok,
        },
    )


def _restore_state(state: Any, snapshot: Any) -> None:
    if snapshot is None or state is None:
        return
    if isinstance(state, dict):
        state.clear()
        state.update(snapshot)
        return
    restored = type(state).model_validate(snapshot)
    state.__dict__.update(restored.__dict__)


def _write_state(state: Any, field: str, value: str, agent: str) -> None:
    if state is None:
        raise AttributeError(
            f"agent {agent!r} has `output_field={field!r}` but the workflow has no `state=`"
        )
    if isinstance(state, dict):
        state[field] = value
    else:
        setattr(state, field, value)
