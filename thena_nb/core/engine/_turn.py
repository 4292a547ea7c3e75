"""One turn, as named phases: gate → request → model → calls → tools → record.

Running an agent as a step is exactly one turn (S27): one model call, then every tool call
it made, in the order the model gave them. Each phase below is one function, in the order a
turn runs and the order docs/semantics.md states the rules:

- `gate`: the session's pause point before the model call; then `stop`, then `budget`.
- `request`: the `ModelRequest`, exactly what the model is sent (after the agent's history
  processor), and its request key.
- `model`: the call with the executor's retries (S25), or the recorded reply on replay.
- `calls`: the native calls, or those rescued from the text (S21); ids assigned once; the
  model's reasoning kept apart from its answer.
- `tools`: tool gates (`decided`, only when a gate is configured); the second pause point,
  before any tool of the turn runs; then the calls.
- `record`: the `Turn`, recorded (and persisted) before the next turn starts (S28); then
  `on_fail` for each failed call (S11) and the `fails` check (S10).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from thena_nb.core import _portals
from thena_nb.core.engine import _observe
from thena_nb.core.engine._reply_check import check_reply, refused_reply
from thena_nb.core.engine._run_state import CallIds, LoopFrame, Position, RunControl
from thena_nb.core.engine._signals import Halt, LoopBreak, note_once
from thena_nb.core.engine._tool_sources import for_turn
from thena_nb.core.engine.gates import Waiting, hold
from thena_nb.core.parts.agent import Agent
from thena_nb.core.parts.tools import (
    Stopped,
    depth_checked,
    error_observation,
    in_a_thread,
    run_tool_call,
)
from thena_nb.core.records import _sent
from thena_nb.core.records.decisions import proposed_call
from thena_nb.core.records.errors import TransientModelError
from thena_nb.core.records.events import event
from thena_nb.core.records.model import Model, ModelRequest, Reply
from thena_nb.core.records.report import ReportNode
from thena_nb.core.records.types import (
    HistoryView,
    LoopFailure,
    Message,
    SentRequest,
    ToolCall,
    Turn,
    TurnInfo,
    blank,
    construct,
    finished,
)

__all__ = ["take_turn"]


async def take_turn(agent: Agent, at: Position, node: ReportNode) -> Turn:
    """Run one turn of `agent` at `at`, under the report node `node`."""
    control = at.control
    if control.checkpoint is not None and may_pause(at):
        await control.checkpoint("model")  # the gate opens with the session's pause point
    gate(control)
    path = node.path
    key, recorded = request(agent, at, path)
    if agent.sources:
        agent = await for_turn(agent, control, recorded)  # opened once per run
    started_at, t0 = datetime.now(UTC), time.perf_counter()
    reply, attempts, sent = await answered(agent, at, node, recorded)
    history = at.scope.history
    first = len(history)
    fresh = recorded is None or made_here(control, recorded)
    reply, proposed = calls(agent, reply, key, history, recorded, control.call_ids, fresh=fresh)
    try:
        if proposed and (agent._gated or control.gates):
            timing = (started_at, time.perf_counter() - t0, attempts)
            asked = (key, sent)
            proposed = await decided(agent, at, path, asked, recorded, reply, proposed, timing)
        done = await tools(agent, at, proposed, recorded)
    except Halt:
        del history[first:]  # stopped (or waiting) before its tools ran: the turn is not recorded
        raise
    control.run.usage.__dict__["tool_calls"] += len(done)  # failed calls count too
    if recorded is not None and control.replay is not None:
        _restore_state(at.ctx.state, control.replay.state_after(len(at.scope.turns)))
    # S10: each open loop's streak after the calls (calls a stop cut short are no failures)
    failures = _count_failures(at.loops, done) if at.stopped is None else []
    timing = (started_at, time.perf_counter() - t0, attempts)
    turn = _turn(agent, at, path, (key, sent), recorded, reply, done, timing)
    if _observe.observer is not None:
        _observe.observer.turn_finished(node, turn)
    turn = await record(agent, at, node, turn, done, first, failures)
    if at.stopped is not None:
        raise Halt("stop", at.stopped)  # `Session.stop()` cut the tools short: kept, then stop
    return turn


async def answered(
    agent: Agent, at: Position, node: ReportNode, recorded: Turn | None
) -> tuple[Reply, int, SentRequest | None]:
    """The model phase as a turn runs it (`model`), told to the observer, with
    `Session.stop()` able to cancel the call and a failure noted on the turn's node."""
    control = at.control
    path = node.path
    if _observe.observer is not None:
        _observe.observer.turn_started(agent, at, node, recorded)
    at.in_call = True  # what `Session.stop()` cancels
    try:
        return await model(agent, at, path, recorded)
    except asyncio.CancelledError:
        stopped_during_call(control)
        raise
    except Exception as exc:
        if _observe.observer is not None:
            _observe.observer.turn_failed(node, exc)
        node.error = f"{type(exc).__name__}: {exc}"
        note_once(exc, f"in turn {len(at.scope.turns)} of agent {agent.name!r} at {path!r}")
        raise
    finally:
        at.in_call = False


# -- gate ------------------------------------------------------------------------------------


def gate(control: RunControl) -> None:
    """Before every model call, once the session's pause point has let the turn through
    (`take_turn`): stop first, then budget."""
    if control.stop_requested:
        raise Halt("stop")
    if control.budget is not None:
        spent = control.budget.spent(control.run.usage)
        if spent is not None:
            raise Halt("budget", spent)


def pauses_before_tools(control: RunControl) -> bool:
    """Whether the pause point before a turn's tools is open: `pause_before_tools`, or a
    `Session.pause()` asked while the model was answering (its tools wait for `continue_()`)."""
    return control.checkpoint is not None and (
        control.pause_before_tools or control.pause_requested
    )


def may_pause(at: Position) -> bool:
    """Whether the session's pause points apply at `at`: at the top level, and in the one
    parallel branch a stepping session runs at a time (`RunControl.in_order`)."""
    if at.top_level:
        return True
    in_order = at.control.in_order
    return in_order is not None and in_order[0] is at


def stopped_during_call(control: RunControl) -> None:
    """A model call was cancelled: by `Session.stop()` it ends the run as a stop (the call
    is not awaited and the unfinished turn is not recorded); any other cancellation goes on."""
    task = asyncio.current_task()
    if control.stop_requested and task is not None:
        task.uncancel()
        raise Halt("stop") from None


# -- request ---------------------------------------------------------------------------------


def request(agent: Agent, at: Position, path: str) -> tuple[str, Turn | None]:
    """The request's key from the history as it stands, and the recorded turn a replay
    serves for it (`None` when the turn goes live)."""
    scope = at.scope
    replay = at.control.replay
    if replay is not None and replay.inserts and at.top_level:
        replay.insert_before(len(scope.turns), scope.history)  # a fork's injected messages
    key = scope.hasher.request_key(scope.history, agent.key)
    recorded = None
    if replay is not None:
        if replay.imported:
            replay.see(scope.history)  # an imported turn is matched by the history's content
        recorded = replay.lookup(len(scope.turns), path, key, in_branch=not at.top_level)
        if recorded is not None and recorded.request_key and replay.copies(recorded):
            key = recorded.request_key  # a fork's copied turn asked what its parent asked
    return key, recorded


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
            "model": getattr(agent.model, "name", ""),
            "on_text_delta": on_text_delta,
        },
    )


# -- model -----------------------------------------------------------------------------------


async def model(
    agent: Agent, at: Position, path: str, recorded: Turn | None
) -> tuple[Reply, int, SentRequest | None]:
    """The model's reply, the attempts it took and the record of what it was sent; a
    recorded reply costs no call and keeps the recorded request."""
    control = at.control
    run = control.run
    usage = run.usage
    if recorded is not None:
        # Usage describes the run's content, so a replay reproduces budget stops exactly;
        # `turn.replayed` (and `attempts == 0`) tells that no call was made.
        usage.__dict__["model_calls"] += 1
        reply, attempts = _recorded_reply(recorded), 0
        source = control.replay.recorded.request_parts if control.replay is not None else {}
        asked = _sent.kept(recorded, source, run.request_parts)
    else:
        on_delta = _announce(control, path, agent.name) if control.subscribers else None
        history = at.scope.history
        sent = model_request(agent, history, on_delta)
        asked = _sent.capture(agent, sent, history, run.request_parts)
        try:
            reply, attempts = await call_model(agent.model, sent, control)
        except ValidationError as exc:  # the model made a Reply with counts that cannot be
            turn = len(at.scope.turns)
            refused = refused_reply(exc, model=sent.model, agent=agent.name, turn=turn)
            if refused is None:
                raise
            raise refused from exc
        if type(reply) is not Reply:  # the model boundary (a Reply checks its own counts)
            check_reply(reply, model=sent.model, agent=agent.name, turn=len(at.scope.turns))
    usage.add(reply)
    return reply, attempts, asked


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
    if _observe.observer is not None:
        model = _observe.watched(model)
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
    """The reply a recorded turn got (its calls come from the turn, in the calls phase)."""
    return Reply(
        text=turn.info.response,
        finish_reason=turn.finish_reason,
        input_tokens=turn.input_tokens,
        output_tokens=turn.output_tokens,
        cache_read_tokens=turn.cache_read_tokens,
        cache_write_tokens=turn.cache_write_tokens,
        reasoning=turn.reasoning,
        reasoning_tokens=turn.reasoning_tokens,
        reasoning_blocks=turn.reasoning_blocks,
        response_model=turn.response_model,
        response_id=turn.response_id,
    )


# -- calls -----------------------------------------------------------------------------------


def calls(
    agent: Agent,
    reply: Reply,
    request_key: str,
    history: list[Message],
    recorded: Turn | None,
    ids: CallIds | None = None,
    *,
    fresh: bool = False,
) -> tuple[Reply, list[ToolCall]]:
    """The turn's calls and the reply as the turn keeps it; the model's message joins the
    history. With the run's `ids`, a call id is unique in the run's history: a call made
    in this run (`fresh`) whose id the run holds already gets a new one (`CallIds`).

    Native calls come through the API; without them, and with `rescue` on, calls written in
    the text are rescued (S21). A rescued call's id comes from the request key and the
    call's position in the text, so a replay, which asks the same, gets the same ids
    whatever order parallel branches' model calls return in; a replay takes the recorded
    calls as the model made them. A call to a `@tool(rescue=False)` tool is a failed call,
    and so is a rescued call whose arguments do not validate (it runs, and the validation
    error goes back to the model, as for a native call).
    Reasoning written in the text (`<think>…</think>`, a harmony analysis channel, …) is
    kept apart from the answer and never searched for calls.
    """
    said = reply.__dict__  # plain reads of the reply's fields: this runs once per turn
    if recorded is not None:
        proposed = [_as_proposed(agent, c) for c in recorded.tool_calls]
    elif said["tool_calls"]:
        proposed = list(said["tool_calls"])
        reply = _without_reasoning(reply, None)
    elif not agent.rescue or not agent.tools or not said["text"]:
        proposed = []
        reply = _without_reasoning(reply, None)
    else:
        prefix = f"rescued-{request_key[:12]}"
        scan = _portals.scan_tool_calls(reply.text, agent.tools, id_prefix=prefix)
        proposed = list(scan.calls)
        if scan.invalid:  # calls meant, with arguments that fail validation when they run
            proposed = sorted([*proposed, *scan.invalid], key=_text_order)
        for call in scan.refused:
            error = error_observation(call.name, call.arguments, reason=call.error)
            proposed.append(finished(call, error=error))
        reply = _without_reasoning(reply, (scan.reasoning, scan.text))
    if recorded is None:
        proposed = [depth_checked(c) for c in proposed]  # a record that can be stored
    if ids is not None and proposed:
        proposed = ids.unique(proposed, history, rename=fresh)
    said = reply.__dict__  # (the reply as the turn keeps it)
    message = blank(Message)
    message["role"] = "assistant"
    message["content"] = said["text"]
    message["agent"] = agent.name
    message["tool_calls"] = proposed
    message["is_error"] = False
    message["reasoning_blocks"] = said["reasoning_blocks"]
    history.append(construct(Message, message))
    return reply, proposed


def made_here(control: RunControl, recorded: Turn) -> bool:
    """Whether a served turn's calls are made in this run (a fork's edited reply, whose
    calls run live), not copied from the recording with the requests made after them."""
    replay = control.replay
    return replay is not None and replay.rerun_tools and not replay.copies(recorded)


def _text_order(call: ToolCall) -> int:
    """A rescued call's place in the text: its id ends with it (`rescued-…-3`)."""
    return int(call.id.rsplit("-", 1)[1])


def _without_reasoning(reply: Reply, found: tuple[str | None, str | None] | None) -> Reply:
    """`reply` with the reasoning in its text moved to `reasoning` (a copy, when any)."""
    said = reply.__dict__
    if said["reasoning"] is not None or not said["text"]:
        return reply  # the adapter kept them apart already
    if found is None:
        reasoning, text = _portals.split_reasoning(reply.text)
    else:
        reasoning, text = found[0], found[1] if found[1] is not None else reply.text
    if reasoning is None and text == reply.text:
        return reply
    return reply.model_copy(update={"text": text, "reasoning": reasoning})


def _as_proposed(agent: Agent, call: ToolCall) -> ToolCall:
    """A recorded call as the model made it: before it ran, or refused as it was then."""
    tool = agent._by_name.get(call.name)
    if call.source == "rescued" and tool is not None and not tool.rescue:
        return call  # refused before it could run
    if call.decision is not None:
        return proposed_call(call)  # the model's own arguments, without the decision
    # What was decided about it comes with its result (a fork's `decision="respond"`).
    return finished(
        call, ok=None, result=None, error=None, retries=0, traceback=None, result_cut=None
    )


# -- tools -----------------------------------------------------------------------------------


async def decided(
    agent: Agent,
    at: Position,
    path: str,
    asked: tuple[str, SentRequest | None],
    recorded: Turn | None,
    reply: Reply,
    proposed: list[ToolCall],
    timing: tuple[datetime, float, int],
) -> list[ToolCall]:
    """The calls with the tool gates' decisions applied (core/engine/gates.py), when some gate may
    hold a call and the tools run live; a recorded turn's outcomes carry their decisions.

    A run that waits for decisions keeps the waiting turn (its reply and calls) for resume.
    """
    replay = at.control.replay
    if recorded is not None and replay is not None and not replay.rerun_tools:
        return proposed
    try:
        return await hold(agent, at, path, proposed, recorded)
    except Waiting as wait:
        wait.turn = _turn(agent, at, path, asked, recorded, reply, proposed, timing)
        raise


async def tools(
    agent: Agent, at: Position, proposed: list[ToolCall], recorded: Turn | None
) -> list[ToolCall]:
    """The calls with their outcomes, in call order (S27): recorded ones on replay, else run
    after the pause point before tools; each result joins the history as a tool message."""
    if not proposed:
        return []
    control = at.control
    if recorded is not None and control.replay is not None and not control.replay.rerun_tools:
        done = _recorded_results(proposed, recorded)
    else:
        checkpoint = control.checkpoint
        if checkpoint is not None and pauses_before_tools(control) and may_pause(at):
            await checkpoint("tools")
        emit = bool(control.subscribers)
        at.in_tools = True  # what `Session.stop()` cancels, beside a model call
        try:
            if agent.parallel_tools and len(proposed) > 1:
                done = await _run_together(agent, proposed, at, emit)
            else:
                done = []
                for call in proposed:  # one after another; after a stop the rest are not run
                    try:
                        done.append(await _run_one(agent, call, at, emit))
                    except asyncio.CancelledError:
                        if not _stop_cancelled(at):
                            raise
                        done.append(_cut(agent, call, at))
                        done.extend(_not_run(c) for c in proposed[len(done) :])
                        break
        finally:
            at.in_tools = False
    _add_results(at.scope.history, agent.name, done)
    return done


async def _run_together(
    agent: Agent, proposed: list[ToolCall], at: Position, emit: bool
) -> list[ToolCall]:
    """S27: the calls run concurrently, but the results keep the order the model gave."""
    running = [asyncio.ensure_future(_run_one(agent, c, at, emit)) for c in proposed]
    try:
        return list(await asyncio.gather(*running))
    except asyncio.CancelledError:
        if not _stop_cancelled(at):
            raise
    await asyncio.wait(running)  # the gather cancelled the calls still running
    return [
        _cut(agent, call, at) if task.cancelled() else task.result()
        for task, call in zip(running, proposed, strict=True)
    ]


def _stop_cancelled(at: Position) -> bool:
    """Whether the tool calls were cancelled by `Session.stop()` (the task then goes on, to
    record the turn); any other cancellation goes on as one."""
    task = asyncio.current_task()
    if not at.control.stop_requested or task is None:
        return False
    task.uncancel()
    return True


def _cut(agent: Agent, call: ToolCall, at: Position) -> ToolCall:
    """A call `Session.stop()` cancelled while it ran: a failed call that says so; a sync
    tool's thread is abandoned, and the run's ending notes it."""
    abandoned = in_a_thread(agent._by_name.get(call.name))
    note = at.stopped or ""
    if abandoned:
        left = f"tool {call.name!r} ({call.id}) was left running in its thread"
        note = f"{note}; {left}" if note else f"stopped while {left}"
    at.stopped = note
    error = error_observation(call.name, call.arguments, exc=Stopped(abandoned=abandoned))
    return finished(call, ok=False, error=error)


def _not_run(call: ToolCall) -> ToolCall:
    """A call of the turn that had not started when `Session.stop()` cut its tools short."""
    if call.ok is not None:
        return call  # refused before it could run
    reason = "the run was stopped before it ran"
    return finished(
        call, ok=False, error=error_observation(call.name, call.arguments, reason=reason)
    )


def _add_results(history: list[Message], agent: str, done: list[ToolCall]) -> None:
    for call in done:
        c = call.__dict__  # plain reads: a call each
        ok = c["ok"]
        message = blank(Message)
        message["role"] = "tool"
        message["content"] = (c["result"] if ok else c["error"]) or ""
        message["agent"] = agent
        message["tool_calls"] = []
        message["tool_call_id"] = c["id"]
        message["is_error"] = not ok
        message["reasoning_blocks"] = ()
        history.append(construct(Message, message))


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
    if _observe.observer is not None:
        _observe.observer.tool_started(agent, call)
    done = await run_tool_call(
        call,
        agent._by_name,
        at.ctx,
        timeout=control.tool_timeout,
        max_chars=control.max_tool_result_chars,
    )
    if _observe.observer is not None:
        _observe.observer.tool_finished(call, done)
    if emit:
        control.emit(event("tool_finished", agent=agent.name, tool_call=done))
    return done


# -- record ----------------------------------------------------------------------------------


async def record(
    agent: Agent,
    at: Position,
    node: ReportNode,
    turn: Turn,
    done: list[ToolCall],
    first: int,
    failures: list[tuple[LoopFrame, LoopFailure]],
) -> Turn:
    """Record the turn, with the messages it added from `history[first]` on, before the next
    turn can start (S28); then run `on_fail` for each failed call (S11) and check `fails`
    (S10)."""
    loops = at.loops
    scope = at.scope
    info = turn.info
    ctx = at.ctx
    ctx.turn = info
    ctx.output = text = info.response
    if agent.output_field is not None:
        _write_state(ctx.state, agent.output_field, text, agent.name)
    node.turns.append(len(scope.turns))
    scope.turns.append(turn)
    for frame in loops:
        frame.turns.append(turn)
        frame.tool_calls += len(done)
    if not at.top_level:
        scope.added.append(scope.history[first:])  # recorded when the parallel block merges
        await at.control.record_branch(turn, ctx.state, scope.history[first:])
        if at.control.in_order is not None:
            _tell_branch_turn(at, turn)
    else:
        await at.control.record(turn, ctx.state, scope.history[first:])
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


def _tell_branch_turn(at: Position, turn: Turn) -> None:
    """Tell the stepping session a turn of the branch it runs now, as the merge will index it."""
    control = at.control
    in_order, hook = control.in_order, control.on_branch_turn
    if in_order is None or in_order[0] is not at or hook is None:
        return
    shift = in_order[1]
    hook(turn.model_copy(update={"index": turn.index + shift}) if shift else turn)


def _turn(
    agent: Agent,
    at: Position,
    path: str,
    asked: tuple[str, SentRequest | None],
    recorded: Turn | None,
    reply: Reply,
    done: list[ToolCall],
    timing: tuple[datetime, float, int],
) -> Turn:
    """The turn's record (`consecutive_fails`: the innermost loop's streak, counted first);
    `asked`: the request key and the record of what the model was sent."""
    inner = at.loops[-1] if at.loops else None
    started_at, duration_s, attempts = timing
    key, sent = asked

    if recorded is None and getattr(agent.model, "provider", False) is False:
        cost = saved = None  # an offline model (no `provider`): billed by no one
        at.control.run.usage.__dict__["unpriced_turns"] += 1
    else:
        cost, saved = _cost(agent.model, reply, recorded)
        at.control.run.usage.add_cost(cost, saved)
    said = reply.__dict__  # plain reads of the reply's fields: this runs once per turn
    values = blank(Turn)
    values["index"] = len(at.scope.turns)
    values["step_path"] = path
    values["agent"] = agent.name
    values["model"] = getattr(agent.model, "name", "")
    values["iteration"] = inner.iteration if inner else None
    values["branch"] = at.scope.branch
    values["info"] = _turn_info(said["text"], done)
    values["tool_calls"] = done
    values["finish_reason"] = said["finish_reason"] or (
        "tool_use" if said["tool_calls"] else "end_turn"
    )
    values["input_tokens"] = said["input_tokens"]
    values["output_tokens"] = said["output_tokens"]
    values["cache_read_tokens"] = said["cache_read_tokens"]
    values["cache_write_tokens"] = said["cache_write_tokens"]
    values["attempts"] = attempts
    values["consecutive_fails"] = inner.consecutive if inner else 0
    values["started_at"] = started_at
    values["duration_s"] = duration_s
    values["request_key"] = key
    values["request"] = sent
    values["replayed"] = recorded is not None and _served(at)
    values["reasoning"] = said["reasoning"]
    values["reasoning_tokens"] = said["reasoning_tokens"]
    values["reasoning_blocks"] = said["reasoning_blocks"]
    values["cost_usd"] = cost
    values["saved_usd"] = saved
    values["response_model"] = said["response_model"]
    values["response_id"] = said["response_id"]
    return construct(Turn, values)


def _served(at: Position) -> bool:
    """A turn the replay served is replayed unless its tools ran again (a fork's new reply)."""
    replay = at.control.replay
    return replay is not None and not replay.rerun_tools


def _cost(model: Any, reply: Reply, recorded: Turn | None) -> tuple[float | None, float | None]:
    """The turn's cost in dollars (`None`: no price is known), and a replayed turn's saving:
    what its call cost when it was first made."""
    if recorded is not None:
        return 0.0, recorded.saved_usd if recorded.replayed else recorded.cost_usd
    return _portals.turn_cost(model, reply), None


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
    last, failed = done[-1], False
    for c in done:  # (a loop: `all()` over a generator costs more, a turn each)
        if not c.ok:
            failed = True
            break
    return construct(
        TurnInfo,
        {
            "called_tool": True,
            "tool_name": last.name,
            "tool_error": failed,
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
