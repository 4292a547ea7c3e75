"""What-if: where each loop would have stopped under another `until`, from the recorded
turns alone (no model call).

Example:
    >>> from thena_nb import Agent, Workflow, loop, max_tool_calls, tool, until_answered
    >>> from thena_nb.models import ScriptedModel, reply
    >>> @tool
    ... def add(a: int, b: int) -> int:
    ...     '''Add two numbers.'''
    ...     return a + b
    >>> calc = Agent("Calc", model=ScriptedModel([reply.tool("add", a=2, b=2), "4"]),
    ...              tools=[add])
    >>> run = Workflow("sums", [loop(steps=[calc], until=until_answered)]).run("go", store=False)
    >>> what_if(run, max_tool_calls(1))
    {'sums/0.loop': WhatIf(iteration=1, stop_reason='until')}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from thena_nb.core.parts.steps import LoopStep, walk
from thena_nb.core.parts.stopping import call_condition
from thena_nb.core.records.report import ReportNode
from thena_nb.core.records.types import HistoryView, LoopStopReason, Message, Turn, TurnInfo, Usage
from thena_nb.core.runs._view import RunView

__all__ = ["RecordedContext", "WhatIf", "what_if", "what_if_context"]


class WhatIf(BaseModel):
    """Where a loop would have stopped under another `until`, from its recorded turns."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    iteration: int | None = None
    """The recorded iteration after which `until` first holds; for a loop that was
    exhausted and where `until` never holds, its last (`max_iterations`); `None` when the
    recording cannot tell (it holds after none of the recorded iterations of a loop that
    stopped for another reason)."""
    stop_reason: Literal["until", "exhausted"] | None = None
    """`"until"` when it would have stopped the loop; `"exhausted"` when the loop would still
    have run to `max_iterations`; else `None`."""


class RecordedContext:
    """What a stop condition sees after a recorded iteration: a stand-in for `Context`.

    Attributes:
        turn: The last turn's `TurnInfo` (`None` before any turn).
        turns: Every turn up to the end of the iteration.
        iteration: The 1-based iteration just finished.
        loop_turns: The loop's own turns up to the end of the iteration.
        loop_tool_calls: Tool calls those turns made.
        output: The last turn's text.
        state: The state snapshot after the last turn (a model of the workflow's state class
            when known, else a dict), or `None` where the run kept none.
        last_loop_stop_reason: The stop reason of the loop that ended most recently.
        history: The history up to the end of the iteration.
        run_id: The recorded run's id.
    """

    __slots__ = (
        "_usage",
        "history",
        "iteration",
        "last_loop_stop_reason",
        "loop_tool_calls",
        "loop_turns",
        "output",
        "run_id",
        "state",
        "turn",
        "turns",
    )

    def __init__(
        self,
        *,
        turns: Sequence[Turn],
        loop_turns: Sequence[Turn],
        iteration: int,
        state: Any = None,
        history: Sequence[Message] = (),
        last_loop_stop_reason: LoopStopReason | None = None,
        run_id: str = "",
    ) -> None:
        self.turns = turns
        self.loop_turns = loop_turns
        self.loop_tool_calls = sum(len(t.tool_calls) for t in loop_turns)
        self.iteration = iteration
        self.state = state
        self.history = history
        self.last_loop_stop_reason = last_loop_stop_reason
        self.run_id = run_id
        last = turns[-1] if turns else None
        self.turn: TurnInfo | None = last.info if last is not None else None
        self.output: Any = last.info.response if last is not None else None
        self._usage: Usage | None = None

    @property
    def usage(self) -> Usage:
        """Tokens, model calls and tool calls of the turns so far."""
        if self._usage is None:
            self._usage = Usage.of(self.turns)
        return self._usage

    def __repr__(self) -> str:
        return f"RecordedContext(turns={len(self.turns)}, iteration={self.iteration})"


def what_if(
    run: RunView, until: Callable[..., Any], *, state_type: type[BaseModel] | None = None
) -> dict[str, WhatIf]:
    """Where each loop of `run` would have stopped under another `until` (no model call).

    `until` is evaluated on the recorded turns after every recorded iteration at which the
    executor would have checked it: every iteration of a loop that stopped on `until` or
    `exhausted`; for `fails`, and for `budget`, `stop` or an error that cut an iteration
    short, every iteration before the last.

    Args:
        run: A recorded run (live, or loaded from a store).
        until: `until(ctx)` or `until(ctx, state)`; it gets a `RecordedContext`.
        state_type: The state class the snapshots are read into; by default the run's
            workflow's (a loaded run has none, so the state is a dict).

    Returns:
        `{loop_path: WhatIf}`: where `until` first holds; for an exhausted loop where it
        never holds, `WhatIf(iteration=max_iterations, stop_reason="exhausted")`; else
        `WhatIf()` (the recording cannot tell). A loop that ran more than once (inside
        another loop) has one entry per run: `path`, then `path#2`, `path#3`, ...
    """
    recording = _Recording(run, state_type)
    seen: Counter[str] = Counter()
    out: dict[str, WhatIf] = {}
    for node in run.loops:
        seen[node.path] += 1
        key = node.path if seen[node.path] == 1 else f"{node.path}#{seen[node.path]}"
        by_iteration = _iteration_turns(node)
        loop_turns: list[Turn] = []
        answer = WhatIf()
        for iteration in range(1, _checked_iterations(run, node) + 1):
            loop_turns.extend(run.turns[i] for i in by_iteration.get(iteration, ()))
            if _holds(until, recording.context(node, iteration, loop_turns)):
                answer = WhatIf(iteration=iteration, stop_reason="until")
                break
        if answer.iteration is None and node.stop_reason == "exhausted":
            answer = WhatIf(iteration=node.iterations, stop_reason="exhausted")
        out[key] = answer
    return out


def what_if_context(
    run: RunView, loop: ReportNode, iteration: int, *, state_type: type[BaseModel] | None = None
) -> RecordedContext:
    """The `RecordedContext` a stop condition of `loop` would see after `iteration`.

    Args:
        run: A recorded run.
        loop: One of `run.loops`.
        iteration: A recorded iteration of that loop (1-based).
        state_type: The state class the snapshot is read into (see `what_if`).
    """
    by_iteration = _iteration_turns(loop)
    indexes = sorted(i for it, idx in by_iteration.items() if it <= iteration for i in idx)
    return _Recording(run, state_type).context(loop, iteration, [run.turns[i] for i in indexes])


class _Recording:
    """What every what-if context of one run shares, worked out once."""

    def __init__(self, run: RunView, state_type: type[BaseModel] | None) -> None:
        self.run = run
        self.state_type = state_type or getattr(run.workflow, "state", None)
        # Turns are in history order: turn k's messages start at the k-th assistant message.
        self.starts = [i for i, m in enumerate(run.history) if m.role == "assistant"]
        self.loop_ends: list[tuple[int, ReportNode]] = []
        for node in run.loops:
            indexes = node.turn_indexes()
            if indexes:
                self.loop_ends.append((indexes[-1], node))
        self._ancestors: dict[int, set[int]] = {}

    def context(self, node: ReportNode, iteration: int, loop_turns: list[Turn]) -> RecordedContext:
        run = self.run
        first = node.turn_indexes()[0] if loop_turns else None
        last = loop_turns[-1].index if loop_turns else (first or 0) - 1
        snapshot = run.states.get(last) if last >= 0 else None
        state: Any = snapshot
        if snapshot is not None and self.state_type is not None:
            state = self.state_type.model_validate(snapshot)
        end = self.starts[last + 1] if last + 1 < len(self.starts) else len(run.history)
        return RecordedContext(
            turns=HistoryView(run.turns, last + 1),
            loop_turns=HistoryView(loop_turns, len(loop_turns)),
            iteration=iteration,
            state=state,
            history=HistoryView(run.history, end),
            last_loop_stop_reason=self._last_stop_reason(node, last),
            run_id=run.run_id,
        )

    def _last_stop_reason(self, node: ReportNode, last: int) -> LoopStopReason | None:
        """The stop reason of the loop that ended most recently by turn `last`."""
        skip = self._ancestors.get(id(node))
        if skip is None:
            skip = self._ancestors[id(node)] = {id(n) for n in _ancestors(self.run.report, node)}
            skip.add(id(node))
        best: tuple[int, LoopStopReason | None] | None = None
        for end, other in self.loop_ends:
            if end <= last and id(other) not in skip and (best is None or end > best[0]):
                best = (end, other.stop_reason)
        return best[1] if best is not None else None


def _holds(until: Callable[..., Any], ctx: RecordedContext) -> bool:
    return bool(call_condition(until, ctx, ctx.state))


def _iteration_turns(node: ReportNode) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for child in node.children:
        if child.iteration is not None:
            out.setdefault(child.iteration, []).extend(child.turn_indexes())
    for indexes in out.values():
        indexes.sort()
    return out


def _checked_iterations(run: RunView, node: ReportNode) -> int:
    """How many recorded iterations ended with the executor checking `until`."""
    n = node.iterations
    if n == 0 or node.stop_reason in ("until", "exhausted"):
        return n
    if node.stop_reason == "fails":
        return n - 1  # `fails` is checked after the turn, before `until` could be
    width = _loop_width(run, node)
    if width is None:
        return n - 1
    done = sum(1 for c in node.children if c.iteration == n)
    return n if done >= width else n - 1


def _loop_width(run: RunView, node: ReportNode) -> int | None:
    """Steps per iteration: from the workflow when known, else from a finished iteration."""
    step = _step_at(run.workflow, node.path) if run.workflow is not None else None
    if isinstance(step, LoopStep):
        return len(step.steps)
    if node.iterations > 1:
        return sum(1 for c in node.children if c.iteration == 1)
    return None


def _step_at(workflow: Any, path: str) -> Any:
    return next((step for p, step in walk(workflow.steps, workflow.name) if p == path), None)


def _ancestors(root: ReportNode, target: ReportNode) -> list[ReportNode]:
    path: list[ReportNode] = []

    def walk(node: ReportNode) -> bool:
        if node is target:
            return True
        path.append(node)
        if any(walk(child) for child in node.children):
            return True
        path.pop()
        return False

    walk(root)
    return path
