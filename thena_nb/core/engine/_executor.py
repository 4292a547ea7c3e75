"""Walks the step tree: sequences, parallel blocks, loops and their stop reasons."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, assert_never

from thena_nb.core.engine import _observe
from thena_nb.core.engine._run_state import LoopFrame, Position, Scope
from thena_nb.core.engine._signals import Halt, LoopBreak, note_once
from thena_nb.core.engine._turn import may_pause, take_turn
from thena_nb.core.engine.foreign import ForeignAgent, run_foreign
from thena_nb.core.parts.agent import Agent
from thena_nb.core.parts.steps import LoopStep, ParallelStep, step_name, step_path
from thena_nb.core.parts.stopping import call_condition
from thena_nb.core.records import _sent
from thena_nb.core.records.events import event
from thena_nb.core.records.report import ReportNode, new_node
from thena_nb.core.records.types import Turn

__all__ = ["run_steps"]


async def run_steps(
    steps: Sequence[Any],
    at: Position,
    parent: ReportNode,
    *,
    iteration: int | None = None,
    paths: Sequence[str] | None = None,
) -> bool:
    """Run `steps` in order under `parent`; returns whether any turn or function step ran.

    `paths`: the steps' paths when the caller knows them (a loop computes them once, not
    once per iteration)."""
    ran = False
    for i, step in enumerate(steps):
        path = step_path(parent.path, i, step) if paths is None else paths[i]
        ran = await run_step(step, at, parent, path, iteration=iteration) or ran
    return ran


async def run_step(
    step: Any, at: Position, parent: ReportNode, path: str, *, iteration: int | None = None
) -> bool:
    """Run one step; returns whether a turn or function step ran."""
    match step:
        case Agent():
            here = new_node("agent", step.name, path, iteration)
            parent.children.append(here)
            try:
                if type(step) is Agent or not isinstance(step, ForeignAgent):
                    await take_turn(step, at, here)
                else:
                    await run_foreign(step, at, here)  # its whole run: a turn per model call
            except Halt:
                if not here.turns:  # halted before its model call: no turn, no node
                    parent.children.remove(here)
                raise
            return True
        case ParallelStep():
            here = new_node("parallel", "parallel", path, iteration)
            parent.children.append(here)
            return await run_parallel(step, at, here)
        case LoopStep():
            here = new_node("loop", "loop", path, iteration)
            here.max_iterations = step.max_iterations
            here.max_fails = step.max_fails
            parent.children.append(here)
            return await run_loop(step, at, here)
        case _ if callable(step):
            here = new_node("function", step_name(step), path, iteration)
            parent.children.append(here)
            await run_function(step, at, here)
            return True
        case _:
            assert_never(step)


async def run_function(fn: Any, at: Position, node: ReportNode) -> None:
    """A plain function step `fn(ctx)`; its return value, if not `None`, becomes the output."""
    if at.control.stop_requested:
        raise Halt("stop")
    ctx = at.ctx
    try:
        value = fn(ctx)
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:
        node.error = f"{type(exc).__name__}: {exc}"
        note_once(exc, f"in function step {node.path!r}")
        raise
    if value is not None:
        ctx.output = value


async def run_parallel(step: ParallelStep, at: Position, node: ReportNode) -> bool:
    """S1–S6: branches run concurrently over snapshots; merged in declaration order.

    A session that may pause (stepping, or `pause()`d) runs the branches one after another
    instead, each to its end, in declaration order (`_in_order`), so that every branch turn
    has its pause point; each still reads the history as the block opened (S3) and the merge
    is the same.
    """
    control = at.control
    branches = [_branch(at, node, b) for b in range(len(step.steps))]

    async def run_branch(b: int) -> bool:
        here, holder = branches[b]
        sub = step.steps[b]
        live = control.tasks
        live[here] = asyncio.current_task()  # type: ignore[assignment]
        try:
            return await run_step(sub, here, holder, step_path(node.path, b, sub))
        finally:
            del live[here]

    tasks: list[asyncio.Future[bool]] = []
    try:
        if control.checkpoint is None or not may_pause(at):
            tasks.extend(asyncio.ensure_future(run_branch(b)) for b in range(len(branches)))
        else:
            await _in_order(at, branches, run_branch, tasks)
        await _join(step, node, tasks, branches)
    except asyncio.CancelledError:
        await _cancel(tasks)
        raise
    ran = await _merge(at, node, branches)
    for t in tasks:
        signal = _exception(t)
        if signal is not None:
            raise signal  # Halt or LoopBreak, after everything finished was kept
    return ran or any(t.result() for t in tasks)


async def _in_order(
    at: Position,
    branches: list[tuple[Position, ReportNode]],
    run_branch: Callable[[int], Awaitable[bool]],
    tasks: list[asyncio.Future[bool]],
) -> None:
    """Run the branches one at a time, in declaration order, each to its end, while the
    session may pause; `RunControl.in_order` names the one running, so its turns have pause
    points and the session hears of each. Once the session runs freely (`run()` resolves
    the shared future), the running branch goes on and the branches not started yet start
    with it (S2). A branch that raised starts no other (S6)."""
    control = at.control
    outer = control.in_order
    shift = outer[1] if outer is not None and outer[0] is at else 0
    free = outer[2] if outer is not None and not outer[2].done() else None
    if free is None:
        free = asyncio.get_running_loop().create_future()
    try:
        for b, (here, _) in enumerate(branches):
            if free.done() or control.checkpoint is None:
                tasks.extend(asyncio.ensure_future(run_branch(i)) for i in range(b, len(branches)))
                return
            control.in_order = (here, shift, free)
            task = asyncio.ensure_future(run_branch(b))
            tasks.append(task)
            either: list[asyncio.Future[Any]] = [task, free]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if task.done() and _is_error(_exception(task)):
                return
            scope = here.scope
            shift += len(scope.turns) - scope.base_turns
    finally:
        control.in_order = outer


def _branch(at: Position, node: ReportNode, b: int) -> tuple[Position, ReportNode]:
    """Branch `b`'s position, over a snapshot of the history (S3), and its holder node."""
    parent = at.scope
    scope = Scope(
        history=list(parent.history),
        turns=list(parent.turns),
        base_turns=len(parent.turns),
        base_messages=len(parent.history),
        branch=b,
        hasher=parent.hasher.fork(parent.history),
    )
    return at.branch(scope), new_node("parallel", "parallel", node.path)


async def _join(
    step: ParallelStep,
    node: ReportNode,
    tasks: Sequence[asyncio.Future[bool]],
    branches: Sequence[tuple[Position, ReportNode]],
) -> None:
    """Wait for every branch; S6: a branch that raises cancels its siblings and the block
    appends nothing, and the error names the branch, whose nodes join the report."""
    pending: set[asyncio.Future[bool]] = set(tasks)
    while pending:
        _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_EXCEPTION)
        failed = next(
            (b for b, t in enumerate(tasks) if t.done() and _is_error(_exception(t))), None
        )
        if failed is None:
            continue
        await _cancel(tasks)
        exc = _exception(tasks[failed])
        assert exc is not None
        name = step_name(step.steps[failed])
        exc.add_note(f"in parallel branch {failed} ({name!r}) of {node.path!r}")
        node.error = f"branch {failed} ({name}): {type(exc).__name__}: {exc}"
        _keep_failed_branch(node, branches[failed][1], failed)
        raise exc


def _keep_failed_branch(node: ReportNode, holder: ReportNode, b: int) -> None:
    """The nodes of the branch that raised join the block's node, the one that raised with
    its `error`; they point at no turn, as the block appends none (S6)."""
    for child in holder.children:
        child.branch = b
        for sub in child.walk():
            sub.turns = []
        node.children.append(child)


async def _cancel(tasks: Sequence[asyncio.Future[bool]]) -> None:
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _exception(task: asyncio.Future[bool]) -> BaseException | None:
    return None if task.cancelled() else task.exception()


def _is_error(exc: BaseException | None) -> bool:
    return exc is not None and not isinstance(exc, (Halt, LoopBreak))


async def _merge(
    at: Position, node: ReportNode, branches: list[tuple[Position, ReportNode]]
) -> bool:
    """S4, S5: append the branches' turns and messages in declaration order."""
    parent = at.scope
    ran = False
    for b, (here, holder) in enumerate(branches):
        scope = here.scope
        own_turns = scope.turns[scope.base_turns :]
        shift = len(parent.turns) - scope.base_turns
        moved_by = len(parent.history) - scope.base_messages  # where its messages will go
        remap: dict[int, int] = {}
        for turn, added in zip(own_turns, scope.added, strict=True):
            new_index = turn.index + shift
            remap[turn.index] = new_index
            if shift or moved_by:
                turn = _merged(turn, new_index, scope.base_messages, moved_by)
            parent.turns.append(turn)
            if at.top_level:
                await at.control.record(turn, at.ctx.state, added)
            else:
                parent.added.append(added)
        if shift:
            for sub in holder.walk():
                sub.turns = [remap.get(i, i) for i in sub.turns]
        parent.history.extend(scope.history[scope.base_messages :])
        for child in holder.children:
            child.branch = b
            node.children.append(child)
        ran = ran or bool(own_turns)
    if branches:
        last, ctx = branches[-1][0].ctx, at.ctx
        ctx.output = last.output  # S5
        ctx.turn = last.turn
        ctx.last_loop_stop_reason = last.last_loop_stop_reason
    return ran


def _merged(turn: Turn, index: int, base: int, by: int) -> Turn:
    """A branch's turn as the run keeps it: at its merged index, and with its request's
    history positions from `base` on (the branch's own messages) moved by `by`."""
    update: dict[str, Any] = {"index": index}
    if by and turn.request is not None:
        update["request"] = _sent.moved(turn.request, base, by)
    return turn.model_copy(update=update)


async def run_loop(step: LoopStep, at: Position, node: ReportNode) -> bool:
    """S7–S14: iterate until `until`, `exhausted`, `fails`, `budget` or `stop`."""
    frame = LoopFrame(step=step, node=node, path=node.path)
    at.loops.append(frame)
    if _observe.observer is not None:
        _observe.observer.loop_started(frame)
    try:
        return await _iterate(step, at, frame)
    except LoopBreak as brk:
        node.stop_reason = brk.reason
        if brk.frame is not frame:
            raise
        return True
    except Halt as halt:
        node.stop_reason = halt.reason
        raise
    except (asyncio.CancelledError, KeyboardInterrupt):
        node.stop_reason = "stop"  # interrupted: the run ends `stopped`
        raise
    except BaseException as exc:
        node.stop_reason = None
        node.error = node.error or f"{type(exc).__name__}: {exc}"
        raise
    finally:
        at.loops.pop()
        at.ctx.last_loop_stop_reason = node.stop_reason
        if _observe.observer is not None:
            _observe.observer.loop_finished(frame)
        control = at.control
        if node.stop_reason is not None and control.subscribers:
            control.emit(event("loop_stopped", path=node.path, stop_reason=node.stop_reason))


async def _iterate(step: LoopStep, at: Position, frame: LoopFrame) -> bool:
    """The iterations of one loop, each followed by `until`, then `exhausted` (S14: until
    wins on the last allowed iteration)."""
    node = frame.node
    ran_any = ran = False
    paths = [step_path(node.path, i, s) for i, s in enumerate(step.steps)]
    while True:
        frame.iteration += 1
        try:
            ran = await run_steps(step.steps, at, node, iteration=frame.iteration, paths=paths)
        except BaseException:
            ran = _iteration_ran(node, frame)
            raise
        finally:
            node.__dict__["iterations"] = frame.iteration if ran else frame.iteration - 1
        ran_any = ran_any or ran
        if _check_until(step, at, frame):
            node.stop_reason = "until"
            return ran_any
        if frame.iteration >= step.max_iterations:
            node.stop_reason = "exhausted"
            if step.on_exhausted is not None:
                try:
                    step.on_exhausted(at.ctx, frame.iteration)
                except Exception as exc:
                    note_once(exc, f"in `on_exhausted` of loop {node.path!r}")
                    raise
            return ran_any


def _iteration_ran(node: ReportNode, frame: LoopFrame) -> bool:
    """Whether the current iteration ran a turn or function step (it counts in `iterations`)."""
    for child in reversed(node.children):
        if child.iteration != frame.iteration:
            return False
        if any(n.kind == "function" or n.turns for n in child.walk()):
            return True
    return False


def _check_until(step: LoopStep, at: Position, frame: LoopFrame) -> bool:
    ctx = at.ctx
    try:
        return bool(call_condition(step.until, ctx, ctx.state))
    except Exception as exc:
        note_once(
            exc, f"raised by `until` of loop {frame.path!r} after iteration {frame.iteration}"
        )
        frame.node.error = f"{type(exc).__name__}: {exc}"
        raise
