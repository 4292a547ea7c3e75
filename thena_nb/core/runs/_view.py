"""`RunView`: what the analyses of a run (`diff.py`, `what_if.py`) read of it.

A `Run` is one; naming what they read here keeps them from importing `run.py`, which
imports them for `run.diff()` and `run.what_if()`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from thena_nb.core.records.report import ReportNode
from thena_nb.core.records.types import Message, RunStatus, Turn

__all__ = ["RunView"]


class RunView(Protocol):
    """A run as a record to read: its id, status, error, turns, history, report and
    states."""

    @property
    def run_id(self) -> str: ...
    @property
    def status(self) -> RunStatus: ...
    @property
    def turns(self) -> Sequence[Turn]: ...
    @property
    def history(self) -> Sequence[Message]: ...
    @property
    def error(self) -> str | None: ...
    @property
    def report(self) -> ReportNode: ...
    @property
    def states(self) -> Mapping[int, Any]: ...
    @property
    def loops(self) -> list[ReportNode]: ...
    @property
    def workflow(self) -> Any:
        """The workflow that made the run, when known (`None` for a loaded run)."""
        ...
