"""Run again from a recording: fork a run at a turn, continue it, resume a stored run.

Forks and resumes are replays (`_replay.py`) with a policy of their own: a fork reuses turns
`0..at-1` by step path alone and runs the rest live with the workflow changed (turn `at`
edited when asked: another reply, other tool results, messages put before it); a resume
reuses every stored turn that asks the same thing and finishes the run under its own id. A
continuation (`run.continue_with`) is no replay: the new run starts with the old one's
turns and history, a new user message, and runs the workflow's steps again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from thena_nb.core import _portals
from thena_nb.core._collector import fewer_collections
from thena_nb.core.engine._replay import ForkReplay, Replay
from thena_nb.core.engine.gates import WaitingReplay, resume_decisions
from thena_nb.core.engine.session import Session
from thena_nb.core.parts.changes import Changes, apply_changes
from thena_nb.core.parts.plan import Plan
from thena_nb.core.records.decisions import Approver, Decision
from thena_nb.core.records.model import Reply
from thena_nb.core.records.types import Message
from thena_nb.core.runs.run import Run
from thena_nb.core.store.base import RunRecorder, RunStore, TurnRecord, records_of, resolve_store

__all__ = ["acontinue", "afork", "aresume", "fork_session"]


class _Resumable(Plan, Protocol):
    """What a fork and a resume use of a workflow: its definition, and `arun` to go on."""

    def arun(self, *args: Any, **kwargs: Any) -> Awaitable[Run]: ...


async def afork(
    workflow: Plan,
    run: Run,
    at: int,
    *,
    reply: Any = None,
    tool_results: Mapping[str, str] | None = None,
    inject: Sequence[Message | str] | None = None,
    changes: Changes | None = None,
    store: RunStore | Literal[False] | None = None,
) -> Run:
    """A new run of `workflow` (with `changes` applied) that reuses `run`'s turns `0..at-1`
    and runs turn `at` onward live, turn `at` edited by `reply`, `tool_results` or
    `inject` (see `Run.fork`).

    The reused turns make no model call and no tool call, even where `changes` alter what
    they would have asked: the fork keeps what happened before `at`, then goes on with the
    changed workflow. A reused turn is matched by its step path; where the changed workflow
    takes another path before `at`, the fork goes live there (`run.replay_diverged_at`).

    Raises:
        ValueError: `at` is out of range, an edit does not fit turn `at`, or a change names
            no agent or step.
        TypeError: `reply` or `inject` is of the wrong kind.
    """
    session = fork_session(
        workflow,
        run,
        at,
        reply=reply,
        tool_results=tool_results,
        inject=inject,
        changes=changes,
        store=store,
    )
    with fewer_collections():  # it runs to its end: see `core/_collector.py`
        fork = await session.run()
    source = session._control.replay
    if isinstance(source, ForkReplay) and source.inject_left:
        error = ValueError(
            f"the fork of run {run.run_id!r} ended without a turn {at}, so the messages "
            f"given in `inject=` were never sent to a model (the fork is `exc.run`). To go "
            f"on from the end of a run with a new user message, use "
            f"`run.continue_with(text)`; or fork at an earlier turn"
        )
        error.run = fork  # type: ignore[attr-defined]
        raise error
    return fork


def fork_session(
    workflow: Plan,
    run: Run,
    at: int,
    *,
    reply: Any = None,
    tool_results: Mapping[str, str] | None = None,
    inject: Sequence[Message | str] | None = None,
    changes: Changes | None = None,
    store: RunStore | Literal[False] | None = None,
    at_gate: Literal["pause", "wait"] = "wait",
) -> Session:
    """The session of `afork`, not started: stepping it replays turns `0..at-1`, then
    serves turn `at` as edited (the Stepper's "Edit this turn and continue" steps it).

    Raises:
        ValueError: As `afork`.
        TypeError: As `afork`.
    """
    edited = reply is not None or tool_results is not None
    _check_at(run, at, edited)
    new_reply = _as_reply(reply) if reply is not None else None
    results = _check_results(run, at, reply, tool_results) if tool_results is not None else None
    messages = _as_messages(inject, tool_results) if inject is not None else []
    if edited or messages:
        _check_top_level(run, at)
    if messages and at == len(run.turns) and run.status == "finished" and not changes:
        raise ValueError(
            f"run {run.run_id!r} finished after its last turn ({at - 1}), so a fork at "
            f"{at} replays it to the same end and the messages in `inject=` would never reach "
            f"a model. Use `run.continue_with(text)` to go on from the end with a new user "
            f"message, or fork at an earlier turn"
        )
    changed = apply_changes(workflow, changes)
    source = ForkReplay(run, at, reply=new_reply, results=results, inject=messages)
    recorder = resolve_store(store)
    session = Session(changed, run.input, replay=source, recorder=recorder, at_gate=at_gate)
    fork = session.result
    fork.parent_run_id, fork.forked_at, fork._parent = run.run_id, at, run
    return session


def _check_at(run: Run, at: int, edited: bool) -> None:
    last = len(run.turns) - 1 if edited else len(run.turns)
    if isinstance(at, bool) or not isinstance(at, int) or not 0 <= at <= last:
        what = "the index of the turn to edit" if edited else "a turn index"
        raise ValueError(f"`at` must be {what} from 0 to {last}, got {at!r}")


def _check_top_level(run: Run, at: int) -> None:
    turn = run.turns[at] if at < len(run.turns) else None
    if turn is not None and turn.branch is not None:
        raise ValueError(
            f"turn {at} ran inside a parallel block (branch {turn.branch} of "
            f"{turn.step_path!r}); edit a turn outside parallel blocks, or fork at the "
            f"block's first turn without an edit"
        )


def _as_reply(reply: Any) -> Reply:
    """A fork's new reply: text, or what `reply.tool(...)` / `reply.calls(...)` make."""
    if isinstance(reply, str):
        return Reply(text=reply, finish_reason="end_turn")
    if isinstance(reply, Reply):
        return reply
    raise TypeError(
        f"`reply=` takes the model's new answer: a str, `reply.tool(...)`, "
        f"`reply.calls(...)` or a `Reply`; got {type(reply).__name__}"
    )


def _check_results(
    run: Run, at: int, reply: Any, tool_results: Mapping[str, str]
) -> dict[str, str]:
    if reply is not None:
        raise ValueError(
            "`reply=` and `tool_results=` cannot go together: a new reply makes new calls, "
            "which run live. Fork with `reply=` alone, or with `tool_results=` for the "
            "recorded reply's calls"
        )
    if not isinstance(tool_results, Mapping) or not tool_results:
        raise TypeError(
            f"`tool_results=` takes a non-empty dict of call id to result text, got "
            f"{tool_results!r}"
        )
    ids = [c.id for c in run.turns[at].tool_calls]
    for call_id, text in tool_results.items():
        if call_id not in ids:
            known = ", ".join(map(repr, ids)) if ids else "none: it made no tool call"
            raise ValueError(f"turn {at} has no tool call {call_id!r}; its call ids: {known}")
        if not isinstance(text, str):
            raise TypeError(
                f"`tool_results[{call_id!r}]` must be the result's text (a str), got "
                f"{type(text).__name__}"
            )
    return dict(tool_results)


def _as_messages(inject: Sequence[Message | str], tool_results: Any) -> list[Message]:
    if tool_results is not None:
        raise ValueError(
            "`inject=` and `tool_results=` cannot go together: turn `at` keeps its recorded "
            "reply, which was made without the new messages. Inject alone, or with `reply=`"
        )
    if isinstance(inject, (str, Message)) or not isinstance(inject, Sequence):
        raise TypeError(f"`inject=` takes a list of messages, got {inject!r}")
    out = []
    for m in inject:
        if isinstance(m, str):
            m = Message(role="user", content=m)
        if not isinstance(m, Message) or m.role != "user":
            raise TypeError(
                f"`inject=` takes user messages (`Message(role='user', content=...)` or "
                f"text), got {m!r}"
            )
        out.append(m)
    return out


async def acontinue(
    workflow: Plan,
    run: Run,
    text: str,
    *,
    store: RunStore | Literal[False] | None = None,
    replay: Run | None = None,
) -> Run:
    """A new run that goes on from the end of `run` with the user message `text`.

    The new run starts with `run`'s turns (kept as recorded, `replayed=True`, indexes
    `0..n-1`), history, states, usage and final state, then the message `text`; the
    workflow's steps run again from the top, live, and their turns are numbered from `n`.
    Its `input` is `text`; `parent_run_id` is `run`'s id and `forked_at` is `n`. With
    `replay` (an earlier continuation), its turns from `n` on are reused while the new run
    asks the same things, as `wf.run(..., replay=)` reuses a run's.

    Raises:
        TypeError: `text` is not a non-empty str.
        ValueError: `run` is waiting for decisions: its waiting turn would be dropped.
    """
    if not isinstance(text, str) or not text:
        raise TypeError(f"`continue_with` takes the user's next message (a str), got {text!r}")
    if run.status == "waiting":
        ids = ", ".join(repr(p.call.id) for p in run.pending)
        raise ValueError(
            f"run {run.run_id!r} is waiting for decisions on tool calls {ids}: its waiting "
            f"turn has not run, so continuing from it would drop that turn. Decide them "
            f"first with `wf.resume({run.run_id!r}, decisions={{call_id: Decision...}})` (or "
            f"`approve=`), then continue the run that returns"
        )
    target = resolve_store(store)
    recorder = _WithParentTurns(target) if target is not None else None
    state = _state_of(workflow, run)
    source = _continued(replay, len(run.turns)) if replay is not None else None
    session = Session(workflow, text, state=state, replay=source, recorder=recorder, at_gate="wait")
    new = session.result
    new.parent_run_id, new.forked_at, new._parent = run.run_id, len(run.turns), run
    new.history[:0] = run.history
    new.turns.extend(t.model_copy(update={"replayed": True}) for t in run.turns)
    new.states.update(run.states)
    new.usage = run.usage.model_copy()
    new.report.children.extend(c.model_copy(deep=True) for c in run.report.children)
    with fewer_collections():  # it runs to its end: see `core/_collector.py`
        return await session.run()


def _continued(recorded: Run, n: int) -> Replay:
    """A replay of a continuation whose new turns start at `n`: the user messages it had
    before turn `n` (its parent's, and its own follow-up) are in the new run's history
    already, from the parent and `text`, so they are not put back again."""
    source = Replay(recorded)
    for index in [i for i in source.inserts if i <= n]:
        del source.inserts[index]
    return source


def _state_of(workflow: Plan, run: Run) -> Any:
    """The state a continuation starts with: a copy of the state `run` ended with."""
    state = run.state
    if workflow.state is None or state is None:
        return None
    if isinstance(state, BaseModel):
        return workflow.state.model_validate(state.model_dump())
    return workflow.state.model_validate(state)


class _WithParentTurns:
    """A recorder that stores the parent's turns first: a continuation holds them too.

    When the run starts its turns are the parent's, and the last one's messages run to the
    end of the history, so they carry the new user message.
    """

    def __init__(self, inner: RunRecorder) -> None:
        self._inner = inner

    async def run_started(self, run: Run) -> None:
        await self._inner.run_started(run)
        for record in records_of(run):
            await self._inner.turn_recorded(run, record)

    async def turn_recorded(self, run: Run, record: TurnRecord) -> None:
        await self._inner.turn_recorded(run, record)

    async def branch_turn_recorded(self, run: Run, record: TurnRecord) -> None:
        keep = getattr(self._inner, "branch_turn_recorded", None)
        if keep is not None:
            await keep(run, record)

    async def run_finished(self, run: Run) -> None:
        await self._inner.run_finished(run)


async def aresume(
    workflow: _Resumable,
    run_id: str,
    *,
    store: RunStore | None = None,
    decisions: Mapping[str, Decision] | None = None,
    approve: Approver | None = None,
) -> Run:
    """Finish a stored run that stopped early (an error, a killed process), under its own id.

    The stored turns are replayed (no model call, no tool call) while the workflow asks the
    same things, and the rest runs live; the stored run is then the complete one. The
    store keeps the replayed turns as they first happened; in the returned `Run` they are
    marked `replayed`. A `"waiting"` run goes on from its waiting turn's stored reply, with
    `decisions` (checked first) for its pending calls (core/engine/gates.py).

    Raises:
        StoreError: The run is not in the store, or there is no store.
        ValueError: The run was made by another workflow.
    """
    source = _portals.require_store(store)
    recorded = source.load(run_id)
    if recorded.workflow_name != workflow.name:
        raise ValueError(
            f"run {run_id!r} was made by workflow {recorded.workflow_name!r}, not "
            f"{workflow.name!r}; resume it with that workflow"
        )
    given = resume_decisions(recorded, workflow, decisions, approve)
    if recorded.status != "waiting":
        return await workflow.arun(
            recorded.input,
            replay=recorded,
            run_id=run_id,
            store=source,
            approve=approve,
            overwrite=True,  # a resume finishes the stored run under its own id
        )
    session = Session(
        workflow,
        recorded.input,
        replay=WaitingReplay(recorded),
        recorder=source,
        run_id=run_id,
        approve=approve,
        at_gate="wait",
    )
    session._keeper.decided.update(given)
    with fewer_collections():  # it runs to its end: see `core/_collector.py`
        return await session.run()
