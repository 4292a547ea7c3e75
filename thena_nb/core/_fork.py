"""Run again from a recording: fork a run at a turn, resume a stored run.

Both are replays (`_replay.py`) with a policy of their own: a fork reuses turns `0..at-1` by
step path alone and runs the rest live with the workflow changed; a resume reuses every
stored turn that asks the same thing and finishes the run under its own id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from thena_nb.core import _portals
from thena_nb.core._replay import ForkReplay
from thena_nb.core.changes import Changes, apply_changes
from thena_nb.core.gates import Approver, Decision, WaitingReplay, resume_decisions
from thena_nb.core.run import Run
from thena_nb.core.session import Session
from thena_nb.core.store.base import RunStore, resolve_store

if TYPE_CHECKING:
    from thena_nb.core.workflow import Workflow

__all__ = ["afork", "aresume"]


async def afork(
    workflow: Workflow,
    run: Run,
    at: int,
    *,
    changes: Changes | None = None,
    store: RunStore | Literal[False] | None = None,
) -> Run:
    """A new run of `workflow` (with `changes` applied) that reuses `run`'s turns `0..at-1`
    and runs turn `at` onward live.

    The reused turns make no model call and no tool call, even where `changes` alter what
    they would have asked: the fork keeps what happened before `at`, then goes on with the
    changed workflow. A reused turn is matched by its step path; where the changed workflow
    takes another path before `at`, the fork goes live there (`run.replay_diverged_at`).

    Raises:
        ValueError: `at` is out of range, or a change names no agent or step.
    """
    if isinstance(at, bool) or not isinstance(at, int) or not 0 <= at <= len(run.turns):
        raise ValueError(f"`at` must be a turn index from 0 to {len(run.turns)}, got {at!r}")
    changed = apply_changes(workflow, changes)
    replay, recorder = ForkReplay(run, at), resolve_store(store)
    session = Session(changed, run.input, replay=replay, recorder=recorder, at_gate="wait")
    fork = session.result
    fork.parent_run_id, fork.forked_at, fork._parent = run.run_id, at, run
    return await session.run()


async def aresume(
    workflow: Workflow,
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
    `decisions` (checked first) for its pending calls (core/gates.py).

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
            recorded.input, replay=recorded, run_id=run_id, store=source, approve=approve
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
    return await session.run()
