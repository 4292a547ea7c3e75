"""Durable runs: load stored runs, list them, fork and resume them, and ask what-if questions.

These are the helpers behind `Run.load`, `run.fork`, `run.what_if`, `wf.resume` and
`thena_nb.runs()`. Runs are kept by a run store (`thena_nb.core.store`) as they happen, one
turn at a time (S28), so a run that crashed can be loaded and resumed, and any run can be
replayed (no model call, no tool call) or forked at a turn with some of the workflow changed.

Example:
    >>> from thena_nb import Agent, Workflow, loop, max_tool_calls, tool, until_answered
    >>> from thena_nb.core.store import MemoryRunStore
    >>> from thena_nb.models import ScriptedModel, reply
    >>> @tool
    ... def add(a: int, b: int) -> int:
    ...     '''Add two numbers.'''
    ...     return a + b
    >>> calc = Agent("Calc", model=ScriptedModel([reply.tool("add", a=2, b=2), "4"]),
    ...              tools=[add])
    >>> wf = Workflow("sums", [loop(steps=[calc], until=until_answered)])
    >>> store = MemoryRunStore()
    >>> run = wf.run("What is 2 + 2?", store=store)
    >>> again = load_run(run.run_id, store=store)
    >>> [t.info.called_tool for t in again.turns], again.stop_reasons
    ([True, False], {'sums/0.loop': 'until'})
    >>> what_if(run, max_tool_calls(1))
    {'sums/0.loop': WhatIf(iteration=1, stop_reason='until')}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from thena_nb.core._aio import run_sync
from thena_nb.core.changes import Changes, apply_changes
from thena_nb.core.errors import StoreError
from thena_nb.core.replay import Replay
from thena_nb.core.report import ReportNode, Run
from thena_nb.core.session import Session
from thena_nb.core.steps import LoopStep
from thena_nb.core.stopping import call_condition
from thena_nb.core.store import RunStore, default_store, resolve_store
from thena_nb.core.types import HistoryView, LoopStopReason, Message, Turn, TurnInfo, Usage
from thena_nb.core.workflow import Workflow

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "RUNS_COLUMNS",
    "RecordedContext",
    "WhatIf",
    "afork",
    "aresume",
    "fork",
    "load_run",
    "resume",
    "runs",
    "what_if",
    "what_if_context",
]

RUNS_COLUMNS = (
    "run_id",
    "workflow",
    "input",
    "status",
    "stop_reasons",
    "turns",
    "input_tokens",
    "output_tokens",
    "started_at",
)
"""The columns of `runs()`, in order."""


# -- loading and listing ---------------------------------------------------------------------


def load_run(run_id: str, *, store: RunStore | None = None) -> Run:
    """A stored run, rebuilt; `run.workflow` is `None` (pass a workflow to fork it).

    Args:
        run_id: The run's id (`run.run_id`, or a row of `runs()`).
        store: The store to read; the default store when not given.

    Raises:
        StoreError: No run `run_id` is stored, or there is no store.
    """
    return _store(store).load(run_id)


def runs(*, store: RunStore | None = None) -> pd.DataFrame:
    """The stored runs as a pandas DataFrame, one row per run, in the order they started.

    Columns: `run_id`, `workflow`, `input`, `status`, `stop_reasons` (a dict of loop path to
    stop reason), `turns`, `input_tokens`, `output_tokens`, `started_at` (UTC).

    Args:
        store: The store to list; the default store when not given.
    """
    import pandas as pd

    rows = _store(store).list_runs()
    frame = pd.DataFrame([{c: row[c] for c in RUNS_COLUMNS} for row in rows], columns=RUNS_COLUMNS)
    for column in ("turns", "input_tokens", "output_tokens"):
        frame[column] = frame[column].astype("int64")
    frame["started_at"] = pd.to_datetime(frame["started_at"], utc=True)
    return frame


def _store(store: RunStore | None) -> RunStore:
    found = store if store is not None else default_store()
    if found is None:
        raise StoreError(
            "there is no run store: THENA_NB_STORE is 'off'. Pass `store=`, or point "
            "THENA_NB_STORE at a file."
        )
    return found


# -- fork and resume -------------------------------------------------------------------------


def fork(
    run: Run,
    at: int,
    *,
    changes: Changes | None = None,
    workflow: Workflow | None = None,
    store: RunStore | Literal[False] | None = None,
) -> Run:
    """A new run that reuses `run`'s turns `0..at-1` and runs turn `at` onward live.

    The reused turns make no model call and no tool call, even where `changes` alter what
    they would have asked: the fork keeps what happened before `at`, then goes on with the
    changed workflow. A reused turn is matched by its step path; where the changed workflow
    takes another path before `at`, the fork goes live there (`run.replay_diverged_at`).

    Args:
        run: The recorded run.
        at: The first turn index to run live (`0 <= at <= len(run.turns)`).
        changes: Changes to apply to the workflow (see `apply_changes`).
        workflow: The workflow to run; by default the run's own. A run loaded from a store
            has none, so it must be given.
        store: Where the new run is kept (a store, `False` for none, `None` for the
            default store).

    Raises:
        ValueError: `at` is out of range, or there is no workflow to run.
    """
    return run_sync(afork(run, at, changes=changes, workflow=workflow, store=store))


async def afork(
    run: Run,
    at: int,
    *,
    changes: Changes | None = None,
    workflow: Workflow | None = None,
    store: RunStore | Literal[False] | None = None,
) -> Run:
    """The async form of `fork`."""
    wf = workflow if workflow is not None else run.workflow
    if wf is None:
        raise ValueError(
            f"run {run.run_id!r} has no workflow (it was loaded from a store); pass "
            f"`workflow=` to fork it"
        )
    if isinstance(at, bool) or not isinstance(at, int) or not 0 <= at <= len(run.turns):
        raise ValueError(f"`at` must be a turn index from 0 to {len(run.turns)}, got {at!r}")
    wf = apply_changes(wf, changes)
    session = Session(wf, run.input, replay=_ForkReplay(run, at), recorder=resolve_store(store))
    return await session.run()


class _ForkReplay(Replay):
    """Serve turns `0..at-1` by step path alone: a fork changes the workflow on purpose.

    A plain replay also compares each request's key, so a changed prompt would replay
    nothing; a fork keeps the recorded turns before `at` whatever they asked.
    """

    def __init__(self, recorded: Run, at: int) -> None:
        super().__init__(recorded, live_from=at)
        self._before = {t.index: t for t in recorded.turns if t.index < at}
        self._branch_paths = {t.step_path for t in recorded.turns if t.branch is not None}
        self._branches: dict[str, list[Turn]] = {}
        for t in recorded.turns:
            if t.branch is not None and t.index < at:
                self._branches.setdefault(t.step_path, []).append(t)

    def lookup(
        self, index: int, path: str, request_key: str, *, in_branch: bool = False
    ) -> Turn | None:
        if self.diverged_at is not None:
            return None
        if in_branch:
            queue = self._branches.get(path)
            if queue:
                return queue.pop(0)
            if path not in self._branch_paths:
                self.diverged_at = index
            return None
        if self.live_from is not None and index >= self.live_from:
            return None
        turn = self._before.get(index)
        if turn is None:
            return None
        if turn.step_path != path:
            self.diverged_at = index
            return None
        return turn


def resume(workflow: Workflow, run_id: str, *, store: RunStore | None = None) -> Run:
    """Finish a stored run that stopped early (an error, a killed process), under its own id.

    The stored turns are replayed (no model call, no tool call) while the workflow asks the
    same things, and the rest runs live; the stored run is then the complete one. The
    store keeps the replayed turns as they first happened; in the returned `Run` they are
    marked `replayed`.

    Args:
        workflow: The workflow that made the run (rebuilt the same way in a new process).
        run_id: The stored run's id.
        store: The store holding the run, where the resumed run is kept too; the default
            store when not given.

    Raises:
        StoreError: The run is not in the store.
        ValueError: The run was made by another workflow.
    """
    return run_sync(aresume(workflow, run_id, store=store))


async def aresume(workflow: Workflow, run_id: str, *, store: RunStore | None = None) -> Run:
    """The async form of `resume`."""
    source = _store(store)
    recorded = source.load(run_id)
    if recorded.workflow_name != workflow.name:
        raise ValueError(
            f"run {run_id!r} was made by workflow {recorded.workflow_name!r}, not "
            f"{workflow.name!r}; resume it with that workflow"
        )
    return await workflow.arun(recorded.input, replay=recorded, run_id=run_id, store=source)


# -- what-if ---------------------------------------------------------------------------------


class WhatIf(BaseModel):
    """Where a loop would have stopped under another `until`, from its recorded turns."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    iteration: int | None = None
    """The recorded iteration after which `until` first holds; `None` when it holds after
    none of them."""
    stop_reason: Literal["until"] | None = None
    """`"until"` when it would have stopped the loop, else `None`."""


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
    run: Run, until: Callable[..., Any], *, state_type: type[BaseModel] | None = None
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
        `{loop_path: WhatIf}`. A loop that ran more than once (inside another loop) has one
        entry per run: `path`, then `path#2`, `path#3`, ...
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
        out[key] = answer
    return out


def what_if_context(
    run: Run, loop: ReportNode, iteration: int, *, state_type: type[BaseModel] | None = None
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

    def __init__(self, run: Run, state_type: type[BaseModel] | None) -> None:
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


def _checked_iterations(run: Run, node: ReportNode) -> int:
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


def _loop_width(run: Run, node: ReportNode) -> int | None:
    """Steps per iteration: from the workflow when known, else from a finished iteration."""
    step = _step_at(run.workflow, node.path) if run.workflow is not None else None
    if isinstance(step, LoopStep):
        return len(step.steps)
    if node.iterations > 1:
        return sum(1 for c in node.children if c.iteration == 1)
    return None


def _step_at(workflow: Workflow, path: str) -> Any:
    steps: Sequence[Any] = workflow.steps
    step: Any = None
    for part in path.split("/")[1:]:
        position, _, _ = part.partition(".")
        if not position.isdigit() or int(position) >= len(steps):
            return None
        step = steps[int(position)]
        steps = getattr(step, "steps", ())
    return step


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
