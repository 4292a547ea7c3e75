"""The run being executed in this task: set by the session, read by offline models.

A module of its own, so that a model can read it without loading `Run` and what `Run`
needs (diffs, gates, what-if): `from thena_nb.models import FunctionModel` stays light.
"""

from __future__ import annotations

import contextvars
from typing import Protocol

__all__ = ["Running", "current_run", "current_run_id"]


class Running(Protocol):
    """What this module knows of the run being executed (a `Run`): its id."""

    @property
    def run_id(self) -> str: ...


_current_run: contextvars.ContextVar[Running | None] = contextvars.ContextVar(
    "thena_nb_run", default=None
)


def current_run() -> Running | None:
    """The run being executed in this task, or `None` outside a run.

    Offline models key their position on it, so that every run starts its script again.
    """
    return _current_run.get()


def current_run_id() -> str | None:
    """The id of the run being executed in this task, or `None` outside a run."""
    run = _current_run.get()
    return run.run_id if run is not None else None
