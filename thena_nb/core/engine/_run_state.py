"""The engine's state while a run runs: run-wide control, and where each step stands.

None of this is for users: steps, tools and stop conditions see the run through `Context`,
a read-mostly view of a `Position`. The executor and the turn pass positions around and
never reach into a context.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel

from thena_nb.core.engine._replay import Replay
from thena_nb.core.parts.context import Context
from thena_nb.core.records._keys import HistoryHasher
from thena_nb.core.records.decisions import Decision, PendingCall
from thena_nb.core.records.events import Event
from thena_nb.core.records.types import Budget, Message, RetryPolicy, ToolCall, Turn, finished
from thena_nb.core.store.base import RunRecorder, TurnRecord

if TYPE_CHECKING:
    from thena_nb.core.parts.agent import Agent
    from thena_nb.core.parts.steps import LoopStep
    from thena_nb.core.records.report import ReportNode
    from thena_nb.core.runs.run import Run

__all__ = ["CallIds", "LoopFrame", "PausePoint", "Position", "RunControl", "Scope"]

PausePoint = Literal["model", "tools"]
"""Where a session can pause inside a turn: before its model call, or before its tools."""


@dataclass(eq=False)
class LoopFrame:
    """The running state of one loop: its counters and its own turns."""

    step: LoopStep
    node: ReportNode
    path: str
    iteration: int = 0
    consecutive: int = 0
    total: int = 0
    tool_calls: int = 0
    turns: list[Turn] = field(default_factory=list)


@dataclass(eq=False)
class Scope:
    """Where turns and messages are recorded: the run itself, or one parallel branch.

    A branch starts from copies of its parent's history and turns (S3) and adds its own
    after `base_turns` / `base_messages`; the block merges them back in declaration order.
    """

    history: list[Message]
    turns: list[Turn]
    base_turns: int = 0
    base_messages: int = 0
    branch: int | None = None
    """The 0-based position in the innermost parallel block; `None` for the run itself."""
    hasher: HistoryHasher = field(default_factory=HistoryHasher)
    """The running fingerprint of `history`, for request keys."""
    added: list[Sequence[Message]] = field(default_factory=list)
    """A branch's own turns' messages, one entry per turn, kept until the block merges."""


class CallIds:
    """Every tool call id in a run's history, so that no two calls of a run share one.

    The rule: a call id is unique within a run's history, across its agents, its parallel
    branches and the turns a fork, a resume or a continuation copied into it. The calls
    phase of every turn passes its calls through `unique`. A call the model made in this
    run whose id the run holds already (two offline models, or one that counts again from 1
    in a fork; a server that gives no ids) gets a new one, `<id>_2` (or `_3`, ...): in the
    recorded call, in its tool result, and so in every later request the model is sent. The
    calls of a turn served from a recording keep their ids (the recording's requests were
    made with them, and a replay matches requests by key), as do those of a foreign agent
    (its framework answers its calls by their ids).

    Ids are given in the order turns reach the calls phase: the same in every run, but for
    parallel branches whose model calls end in another order.
    """

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: set[str] | None = None  # filled from the history at the first turn

    def unique(
        self, calls: list[ToolCall], history: Sequence[Message], *, rename: bool
    ) -> list[ToolCall]:
        """`calls` (a turn's, about to join `history`), those whose id the run holds already
        given a new one when `rename`; their ids are the run's from now on."""
        seen = self._seen
        if seen is None:  # the run's first turn: the history it starts with (a continuation's)
            seen = self._seen = {c.id for m in history for c in m.tool_calls}
            seen.update(m.tool_call_id for m in history if m.tool_call_id is not None)
        if len(calls) == 1:  # (most turns: one call, whose id is new)
            call_id = calls[0].__dict__["id"]
            if call_id and call_id not in seen:
                seen.add(call_id)
                return calls
        out = calls
        for i, call in enumerate(calls):
            call_id = call.id
            if rename and (call_id in seen or not call_id):
                call_id = self._free(call_id)
                if out is calls:
                    out = list(calls)
                out[i] = finished(call, id=call_id)
            seen.add(call_id)
        return out

    def _free(self, call_id: str) -> str:
        """A new id for a call whose id the run holds already: `<id>_2`, `<id>_3`, ...
        (`call_1`, ... for a call without one)."""
        seen = self._seen or set()
        base, n = (call_id, 2) if call_id else ("call", 1)
        while f"{base}_{n}" in seen:
            n += 1
        return f"{base}_{n}"


class Keeper(Protocol):
    """How a run decides its gated calls: `engine/gates.py`'s `Gatekeeper`."""

    decided: dict[str, Decision]

    async def ask(
        self, pending: list[PendingCall], agent: Agent, at: Position
    ) -> list[Decision]: ...


class Sources(Protocol):
    """The tool sources a run has opened: `engine/_tool_sources.py`'s `RunTools`."""

    async def agent_with_tools(self, agent: Agent) -> Agent: ...

    async def aclose(self) -> None: ...


class RunControl:
    """Run-wide state shared by every position of one run: the stop flag, budget, retries,
    replay, the recorder, event subscribers and the session's pause points."""

    __slots__ = (
        "budget",
        "call_ids",
        "checkpoint",
        "deps",
        "gatekeeper",
        "gates",
        "in_order",
        "kept",
        "max_tool_result_chars",
        "on_branch_turn",
        "on_turn",
        "pause_before_tools",
        "pause_requested",
        "recorder",
        "replay",
        "retry",
        "run",
        "stop_requested",
        "subscribers",
        "tasks",
        "tool_sources",
        "tool_timeout",
    )

    def __init__(
        self,
        run: Run,
        *,
        budget: Budget | None,
        retry: RetryPolicy,
        checkpoint: Callable[[PausePoint], Awaitable[None]] | None = None,
        replay: Replay | None = None,
        recorder: RunRecorder | None = None,
    ) -> None:
        self.run = run
        self.replay = replay
        self.recorder = recorder
        self.budget = budget
        self.retry = retry
        self.checkpoint = checkpoint
        self.pause_before_tools = False
        self.pause_requested = False
        """`Session.pause()` was asked and has not taken effect: the next pause point
        pauses, the one before a turn's tools included."""
        self.stop_requested = False
        self.subscribers: list[Callable[[Event], Any]] = []
        self.on_turn: list[Callable[[Turn], Any]] = []
        self.gates: list[Callable[[ToolCall], Any]] = []
        """The session's own gate predicates (`session.gates`), beside the tools' gates."""
        self.gatekeeper: Keeper | None = None
        """How gated calls are decided (core/engine/gates.py); `None`: the run waits."""
        self.tool_sources: Sources | None = None
        """The tool sources the run has opened (`core/engine/_tool_sources.py`), once one is."""
        self.tool_timeout: float | None = None
        """`Workflow(tool_timeout=...)`: the limit of a tool call whose tool sets none."""
        self.max_tool_result_chars: int | None = None
        """`Workflow(max_tool_result_chars=...)`: the longest tool result kept and sent."""
        self.deps: Any = None
        """`wf.run(input, deps=...)`: what a foreign agent's framework gets as its dependencies."""

        self.call_ids = CallIds()
        """The run's call ids: a call's id is unique within the run's history (`CallIds`)."""
        self.tasks: dict[Position, asyncio.Task[Any]] = {}
        """The task running each live position: `Session.stop()` cancels those waiting on a
        model call (`Position.in_call`)."""
        self.in_order: tuple[Position, int, asyncio.Future[None]] | None = None
        """The parallel branch a stepping session runs now (branches then run one at a time,
        in declaration order), how far the block's merge will move its turn indexes, and
        the future `Session.run()` resolves to let the blocks run their branches together."""
        self.on_branch_turn: Callable[[Turn], Any] | None = None
        """Told each turn of `in_order`'s branch as it finishes, with its index after the
        merge (branch turns join the run only when their block merges)."""
        # A resume replays a stored run under its own id: the turns it reuses unchanged are
        # stored already. The first turn that differs makes the stored ones from there stale.
        resuming = replay is not None and replay.recorded.run_id == run.run_id
        self.kept: dict[int, str | None] | None = (
            {t.index: t.request_key for t in replay.recorded.turns}
            if resuming and replay is not None
            else None
        )

    def emit(self, event: Event) -> None:
        for fn in list(self.subscribers):
            fn(event)

    async def record(self, turn: Turn, state: Any, messages: Sequence[Message]) -> None:
        """A turn has joined the run: snapshot the state, tell listeners, persist it (S28)."""
        run = self.run
        if isinstance(state, BaseModel):
            run.states[turn.index] = state.model_dump(mode="json")
        elif isinstance(state, dict):
            run.states[turn.index] = dict(state)
        for hook in self.on_turn:
            hook(turn)
        if self.recorder is not None:
            stored, drop_from = self._plan(turn)
            record = TurnRecord(
                turn, run.states.get(turn.index), tuple(messages), stored, drop_from
            )
            await self.recorder.turn_recorded(run, record)

    async def record_branch(self, turn: Turn, state: Any, messages: Sequence[Message]) -> None:
        """A parallel branch's turn has finished while its block is open: a recorder that
        can (`branch_turn_recorded`) stores it now, so a resume reuses it (a resume's own
        replayed branch turns are stored already)."""
        recorder = self.recorder
        keep = getattr(recorder, "branch_turn_recorded", None)
        if keep is None or (turn.replayed and self.kept is not None):
            return
        snapshot = state.model_dump(mode="json") if isinstance(state, BaseModel) else state
        await keep(self.run, TurnRecord(turn, snapshot, tuple(messages)))

    def _plan(self, turn: Turn) -> tuple[bool, int | None]:
        """Whether the store has `turn` already, and from which index stored turns are stale."""
        kept = self.kept
        if not kept:
            return False, None
        index = turn.index
        if turn.replayed and kept.get(index, "") == turn.request_key:
            return True, None
        stale = any(i >= index for i in kept)
        self.kept = None  # from here on the resume has gone live: nothing stored is reused
        return False, (index if stale else None)


class Position:
    """Where one line of execution stands: the run, its scope, its open loops, its context.

    The top level has one position; each parallel branch gets its own (`branch`).
    """

    __slots__ = ("control", "ctx", "in_call", "in_tools", "loops", "scope", "stopped", "top_level")

    def __init__(
        self,
        control: RunControl,
        scope: Scope,
        *,
        state: Any = None,
        loops: list[LoopFrame] | None = None,
    ) -> None:
        self.control = control
        self.scope = scope
        self.loops: list[LoopFrame] = loops if loops is not None else []
        self.ctx = Context(self, state=state)
        self.top_level = scope.branch is None
        """Not inside a parallel branch: turns are recorded (and a session may pause) here."""
        self.in_call = False
        """Waiting on a model call (its task is in `RunControl.tasks`)."""
        self.in_tools = False
        """Running a turn's tool calls (`Session.stop()` cancels them too)."""
        self.stopped: str | None = None
        """Set when `Session.stop()` cut this position's tool calls short: the note the run
        ends with (`""` or what was left running); the turn is recorded, then the run stops."""

    def branch(self, scope: Scope) -> Position:
        """A position for one parallel branch: same run, state and loops, its own scope."""
        child = Position(self.control, scope, state=self.ctx.state, loops=list(self.loops))
        ctx, parent = child.ctx, self.ctx
        ctx.output = parent.output
        ctx.turn = parent.turn
        ctx.last_loop_stop_reason = parent.last_loop_stop_reason
        return child
