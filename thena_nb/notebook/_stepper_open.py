"""Opening the Stepper: over a live session, or over a recorded run in view mode
(`thena_nb.stepper(run)`, `run.stepper()`)."""

from __future__ import annotations

from typing import Any, Literal

from thena_nb.core.engine.session import Session
from thena_nb.core.runs.run import Run
from thena_nb.core.store.base import RunStore
from thena_nb.notebook._stepper_run import RecordedSession, workflow_for
from thena_nb.notebook.stepper import Stepper

__all__ = ["open_stepper"]


def open_stepper(
    run: Run | Session,
    *,
    workflow: Any = None,
    store: RunStore | Literal[False] | None = None,
) -> Stepper:
    """`thena_nb.stepper(run)`: the Stepper over a recorded run, in view mode, or over a live
    session; `thena_nb.stepper` says all it does."""
    if isinstance(run, Session):
        return Stepper(run)
    if not isinstance(run, Run):
        raise TypeError(
            f"`stepper` opens a `Run` (e.g. `Run.load(run_id)`), got {type(run).__name__}; "
            f"for a new live run use `wf.stepper(input)`"
        )
    return Stepper(RecordedSession(run, workflow=workflow_for(run, workflow), store=store))
