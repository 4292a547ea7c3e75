"""`MemoryRunStore`: the reference run store, kept in the process's memory."""

from __future__ import annotations

import copy
import threading
from typing import Any

from thena_nb.core.errors import StoreError
from thena_nb.core.report import ReportNode, Run
from thena_nb.core.store import (
    RunProgress,
    TurnRecord,
    final_of,
    header_of,
    missing_run,
    rebuild_run,
    summary_of,
)
from thena_nb.core.types import Turn

__all__ = ["MemoryRunStore"]


class MemoryRunStore:
    """A run store in memory: what every store keeps, with nothing in between.

    It keeps copies, never the live `Run`, so `load` shows what a file-backed store would.

    Example:
        >>> from thena_nb import Agent, Workflow
        >>> from thena_nb.core.store import MemoryRunStore
        >>> from thena_nb.models import ScriptedModel
        >>> store = MemoryRunStore()
        >>> wf = Workflow("hello", [Agent("A", model=ScriptedModel(["Hi!"]))])
        >>> run = wf.run("hi", store=store)
        >>> store.load(run.run_id).output, [r["status"] for r in store.list_runs()]
        ('Hi!', ['finished'])
    """

    def __init__(self) -> None:
        self._headers: dict[str, dict[str, Any]] = {}
        self._records: dict[str, dict[int, TurnRecord]] = {}
        self._progress: dict[str, RunProgress] = {}
        self._lock = threading.Lock()

    # -- RunRecorder ----------------------------------------------------------------------

    async def run_started(self, run: Run) -> None:
        """Write the run's header; a run id already stored (a resume) keeps its turns."""
        with self._lock:
            old = self._headers.get(run.run_id)
            header = header_of(run)
            if old is not None:
                header["started_at"] = old["started_at"]
            self._headers[run.run_id] = header
            records = self._records.setdefault(run.run_id, {})
            kept = {i: r.turn.request_key for i, r in records.items()}
            self._progress[run.run_id] = RunProgress(kept=kept)

    async def turn_recorded(self, run: Run, turn: Turn) -> None:
        """Store the turn, its state snapshot and the new history messages."""
        with self._lock:
            progress = self._progress.setdefault(run.run_id, RunProgress())
            messages = progress.take_messages(run)
            write, stale_from = progress.plan(turn)
            records = self._records.setdefault(run.run_id, {})
            if stale_from is not None:
                for i in [i for i in records if i >= stale_from]:
                    del records[i]
            if write:
                state = copy.deepcopy(run.states.get(turn.index))
                records[turn.index] = TurnRecord(turn, state, tuple(messages))

    async def run_finished(self, run: Run) -> None:
        """Store how the run ended, with its history and report."""
        with self._lock:
            self._progress.pop(run.run_id, None)
            header = self._headers.setdefault(run.run_id, header_of(run))
            final = final_of(run)
            final["output"] = copy.deepcopy(final["output"])
            final["state"] = copy.deepcopy(final["state"])
            header.update(final)
            header["history"] = list(run.history)  # messages are frozen: shared safely
            header["report"] = run.report.model_dump()
            records = self._records.setdefault(run.run_id, {})
            for i in [i for i in records if i >= len(run.turns)]:
                del records[i]

    # -- reading --------------------------------------------------------------------------

    def load(self, run_id: str) -> Run:
        """The stored run, rebuilt (`run.workflow` is `None`).

        Raises:
            StoreError: No run `run_id` is stored.
        """
        with self._lock:
            header = self._headers.get(run_id)
            if header is None:
                raise StoreError(missing_run(run_id, list(self._headers)))
            records = self._records.get(run_id, {})
            ordered = [
                TurnRecord(records[i].turn, copy.deepcopy(records[i].state), records[i].messages)
                for i in sorted(records)
            ]
            stored = {
                k: copy.deepcopy(v) for k, v in header.items() if k not in ("history", "report")
            }
            history, report = header.get("history"), header.get("report")
        return rebuild_run(
            stored,
            ordered,
            history=list(history) if history is not None else None,
            report=ReportNode.model_validate(report) if report is not None else None,
        )

    def list_runs(self) -> list[dict[str, Any]]:
        """One summary per stored run, in the order they started."""
        with self._lock:
            out = []
            for run_id, header in self._headers.items():
                turns = [r.turn for r in self._records.get(run_id, {}).values()]
                out.append(
                    summary_of(
                        header,
                        len(turns),
                        sum(t.input_tokens for t in turns),
                        sum(t.output_tokens for t in turns),
                    )
                )
        out.sort(key=lambda row: row["started_at"])
        return out

    def delete(self, run_id: str) -> None:
        """Forget a run (nothing happens when there is no such run)."""
        with self._lock:
            self._headers.pop(run_id, None)
            self._records.pop(run_id, None)
            self._progress.pop(run_id, None)

    def __repr__(self) -> str:
        return f"MemoryRunStore(runs={len(self._headers)})"
