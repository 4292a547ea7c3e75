"""Walks the step tree: sequences, parallel blocks, loops and their stop reasons."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Sequence
from typing import Any, assert_never

from thena_nb.core._signals import Halt, LoopBreak, note_once
from thena_nb.core.agent import Agent, take_turn
from thena_nb.core.context import Context, LoopFrame, Scope
from thena_nb.core.report import ReportNode
from thena_nb.core.steps import LoopStep, ParallelStep, step_name, step_path
from thena_nb.core.stopping import call_condition
from thena_nb.core.types import construct

__all__ = ["run_steps"]


async def run_steps(
    steps: Sequence[Any],
    ctx: Context,
    parent: ReportNode,
    *,
    iteration: int | None = None,
) -> bool:
    """Run `steps` in order under `parent`; returns whether any turn or function step ran."""
    ran = False
    for i, step in enumerate(steps):
        path = step_path(parent.path, i, step)
        ran = await run_step(step, ctx, parent, path, iteration=iteration) or ran
    return ran


async def run_step(
    step: Any, ctx: Context, parent: ReportNode, path: str, *, iteration: int | None = None
) -> bool:
    """Run one step; returns whether a turn or function step ran."""
    match step:
        case Agent():
            node = construct(ReportNode, _node_fields("agent", step.name, path, iteration))
            parent.children.append(node)
            try:
                await take_turn(step, ctx, node)
            except Halt:
                if not node.turns:  # halted before its model call: no turn, no node
                    parent.children.remove(node)
                raise
            return True
        case ParallelStep():
            node = construct(ReportNode, _node_fields("parallel", "parallel", path, iteration))
            parent.children.append(node)
            return await run_parallel(step, ctx, node)
        case LoopStep():
            node = construct(ReportNode, _node_fields("loop", "loop", path, iteration))
            node.max_iterations = step.max_iterations
            node.max_fails = step.max_fails
            parent.children.append(node)
            return await run_loop(step, ctx, node)
        case _ if callable(step):
            node = construct(ReportNode, _node_fields("function", step_name(step), path, iteration))
            parent.children.append(node)
            await run_function(step, ctx, node)
            return True
        case _:
            assert_never(step)


def _node_fields(kind: str, name: str, path: str, iteration: int | None) -> dict[str, Any]:
    return {
        "kind": kind,
        "name": name,
        "path": path,
        "children": [],
        "turns": [],
        "iteration": iteration,
        "branch": None,
        "stop_reason": None,
        "iterations": 0,
        "max_iterations": None,
        "max_fails": None,
        "failures": None,
        "error": None,
    }


async def run_function(fn: Any, ctx: Context, node: ReportNode) -> None:
    """A plain function step `fn(ctx)`; its return value, if not `None`, becomes the output."""
    control = ctx._control
    if control.stop_requested:
        raise Halt("stop")
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


async def run_parallel(step: ParallelStep, ctx: Context, node: ReportNode) -> bool:
    """S1–S6: branches run concurrently over snapshots; merged in declaration order."""
    control = ctx._control
    parent = ctx._scope
    if control.checkpoint is not None and parent.branch is None:
        await control.checkpoint()  # a parallel block is one step for a paused session
    branches: list[tuple[Context, ReportNode]] = []
    for b in range(len(step.steps)):
        scope = Scope(
            history=list(parent.history),  # S3: every branch reads the history as it was
            turns=list(parent.turns),
            base_turns=len(parent.turns),
            base_messages=len(parent.history),
            branch=b,
            hasher=parent.hasher.fork(parent.history),
        )
        holder = construct(ReportNode, _node_fields("parallel", "parallel", node.path, None))
        branches.append((ctx.branch(scope), holder))

    async def run_branch(b: int) -> bool:
        bctx, holder = branches[b]
        sub = step.steps[b]
        return await run_step(sub, bctx, holder, step_path(node.path, b, sub))

    tasks = [asyncio.ensure_future(run_branch(b)) for b in range(len(branches))]
    pending: set[asyncio.Future[bool]] = set(tasks)
    try:
        while pending:
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_EXCEPTION)
            failed = next(
                (b for b, t in enumerate(tasks) if t.done() and _is_error(_exception(t))), None
            )
            if failed is not None:
                # S6: a branch that raises cancels its siblings; the block appends nothing.
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                exc = _exception(tasks[failed])
                assert exc is not None
                name = step_name(step.steps[failed])
                exc.add_note(f"in parallel branch {failed} ({name!r}) of {node.path!r}")
                node.error = f"branch {failed} ({name}): {type(exc).__name__}: {exc}"
                raise exc
    except asyncio.CancelledError:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise

    ran = await _merge(ctx, node, branches)
    for t in tasks:
        signal = _exception(t)
        if signal is not None:
            raise signal  # Halt or LoopBreak, after everything finished was kept
    return ran or any(t.result() for t in tasks)


def _exception(task: asyncio.Future[bool]) -> BaseException | None:
    return None if task.cancelled() else task.exception()


def _is_error(exc: BaseException | None) -> bool:
    return exc is not None and not isinstance(exc, (Halt, LoopBreak))


async def _merge(
    ctx: Context, node: ReportNode, branches: list[tuple[Context, ReportNode]]
) -> bool:
    """S4, S5: append the branches' turns and messages in declaration order."""
    control = ctx._control
    parent = ctx._scope
    ran = False
    for b, (bctx, holder) in enumerate(branches):
        scope = bctx._scope
        own_turns = scope.turns[scope.base_turns :]
        shift = len(parent.turns) - scope.base_turns
        remap: dict[int, int] = {}
        for turn in own_turns:
            new_index = turn.index + shift
            remap[turn.index] = new_index
            if shift:
                turn = turn.model_copy(update={"index": new_index})
            parent.turns.append(turn)
            if parent.branch is None:
                await control.record(turn, ctx.state)
        if shift:
            for sub in holder.walk():
                sub.turns = [remap.get(i, i) for i in sub.turns]
        parent.history.extend(scope.history[scope.base_messages :])
        for child in holder.children:
            child.branch = b
            node.children.append(child)
        ran = ran or bool(own_turns)
    last_ctx = branches[-1][0] if branches else None
    if last_ctx is not None:
        ctx.output = last_ctx.output  # S5
        ctx.turn = last_ctx.turn
        ctx.last_loop_stop_reason = last_ctx.last_loop_stop_reason
    return ran


async def run_loop(step: LoopStep, ctx: Context, node: ReportNode) -> bool:
    """S7–S14: iterate until `until`, `exhausted`, `fails`, `budget` or `stop`."""
    frame = LoopFrame(step=step, node=node, path=node.path)
    ctx._loops.append(frame)
    ran_any = ran = False
    try:
        while True:
            frame.iteration += 1
            try:
                ran = await run_steps(step.steps, ctx, node, iteration=frame.iteration)
            except BaseException:
                ran = _iteration_ran(node, frame)
                raise
            finally:
                node.__dict__["iterations"] = frame.iteration if ran else frame.iteration - 1
            ran_any = ran_any or ran
            # After every iteration: `until`, then `exhausted` (S14: until wins on the last).
            if _check_until(step, ctx, frame):
                node.stop_reason = "until"
                break
            if frame.iteration >= step.max_iterations:
                node.stop_reason = "exhausted"
                if step.on_exhausted is not None:
                    try:
                        step.on_exhausted(ctx, frame.iteration)
                    except Exception as exc:
                        note_once(exc, f"in `on_exhausted` of loop {node.path!r}")
                        raise
                break
    except LoopBreak as brk:
        node.stop_reason = brk.reason
        if brk.frame is not frame:
            raise
    except Halt as halt:
        node.stop_reason = halt.reason
        raise
    except BaseException as exc:
        node.stop_reason = None
        node.error = node.error or f"{type(exc).__name__}: {exc}"
        raise
    finally:
        ctx._loops.pop()
        ctx.last_loop_stop_reason = node.stop_reason
        if node.stop_reason is not None and ctx._control.subscribers:
            from thena_nb.core.session import event

            ctx._control.emit(event("loop_stopped", path=node.path, stop_reason=node.stop_reason))
    return ran_any


def _iteration_ran(node: ReportNode, frame: LoopFrame) -> bool:
    """Whether the current iteration ran a turn or function step (it counts in `iterations`)."""
    for child in reversed(node.children):
        if child.iteration != frame.iteration:
            return False
        if any(n.kind == "function" or n.turns for n in child.walk()):
            return True
    return False


def _check_until(step: LoopStep, ctx: Context, frame: LoopFrame) -> bool:
    try:
        return bool(call_condition(step.until, ctx, ctx.state))
    except Exception as exc:
        note_once(
            exc, f"raised by `until` of loop {frame.path!r} after iteration {frame.iteration}"
        )
        frame.node.error = f"{type(exc).__name__}: {exc}"
        raise
