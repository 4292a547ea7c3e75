"""`MemoryRunStore`: the reference run store, kept in the process's memory."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable
from typing import Any

from thena_nb.core.records.errors import StoreError
from thena_nb.core.records.report import ReportNode
from thena_nb.core.runs.run import Run
from thena_nb.core.store import _owner
from thena_nb.core.store.base import (
    TurnRecord,
    missing_run,
    open_turns_of,
    rebuild_run,
    request_parts_of,
    summary_of,
)

__all__ = ["MemoryRunStore"]


class MemoryRunStore:
    """A run store in memory: what every store keeps, with nothing in between.

    It keeps copies, never the live `Run`, so `load` shows what a file-backed store would.

    Example:
        >>> from thena_nb import Agent, Workflow
        >>> from thena_nb.store import MemoryRunStore
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
        self._parts: dict[str, dict[str, Any]] = {}
        self._branch: dict[str, list[TurnRecord]] = {}
        self._fingerprints: dict[str, dict[str, dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._owner = _owner.new_owner()
        self._refused: set[str] = set()

    # -- RunRecorder ----------------------------------------------------------------------

    async def run_started(self, run: Run) -> None:
        """Claim the run and write its header; a run id already stored (a resume) keeps its
        turns.

        Raises:
            RunInUse: This store is running this run now.
        """
        with self._lock:
            if not _owner.hold(self._owner, run.run_id):
                self._refused.add(run.run_id)
                raise _owner.RunInUse(run.run_id, self._owner, repr(self))
            self._refused.add(run.run_id)  # until the claim is made
            old = self._headers.get(run.run_id)
            refused, stored = _owner.refuses(old["status"] if old is not None else None)
            if refused:
                assert old is not None
                _owner.release(self._owner, run.run_id)
                raise _owner.RunInUse(
                    run.run_id, self._owner, repr(self), old["status"], stored=stored
                )
            self._refused.discard(run.run_id)
            header = run.header()
            if old is not None:
                header["started_at"] = old["started_at"]
            self._headers[run.run_id] = header
            self._records.setdefault(run.run_id, {})

    async def turn_recorded(self, run: Run, record: TurnRecord) -> None:
        """Store the turn, its state snapshot and its messages."""
        if record.stored:
            return
        with self._lock:
            records = self._records.setdefault(run.run_id, {})
            if record.drop_from is not None:
                for i in [i for i in records if i >= record.drop_from]:
                    del records[i]
            state = copy.deepcopy(record.state)
            records[record.turn.index] = TurnRecord(record.turn, state, tuple(record.messages))
            parts = self._parts.setdefault(run.run_id, {})
            for key, value in request_parts_of(run, record.turn).items():
                if key not in parts:
                    parts[key] = copy.deepcopy(value)

    async def branch_turn_recorded(self, run: Run, record: TurnRecord) -> None:
        """Store a parallel branch's turn as it finishes, while its block is still open."""
        with self._lock:
            kept = TurnRecord(record.turn, copy.deepcopy(record.state), tuple(record.messages))
            self._branch.setdefault(run.run_id, []).append(kept)
            parts = self._parts.setdefault(run.run_id, {})
            for key, value in request_parts_of(run, record.turn).items():
                parts.setdefault(key, copy.deepcopy(value))

    async def run_finished(self, run: Run) -> None:
        """Store how the run ended, with its history and report, and release the claim."""
        with self._lock:
            if run.run_id in self._refused or not _owner.holds(self._owner, run.run_id):
                self._refused.discard(run.run_id)
                return  # not its run to end: its claim was refused, or it never started here
            _owner.release(self._owner, run.run_id)
            if run.status == "finished":  # every block merged; else a resume may reuse them
                self._branch.pop(run.run_id, None)
            header = self._headers.setdefault(run.run_id, run.header())
            ending = run.ending()
            ending["output"] = copy.deepcopy(ending["output"])
            ending["state"] = copy.deepcopy(ending["state"])
            header.update(ending)
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
            parts = copy.deepcopy(self._parts.get(run_id, {}))
            branch = [r.turn for r in self._branch.get(run_id, ())]
            stored["status"] = self._shown(run_id, stored["status"])
        run = rebuild_run(
            stored,
            ordered,
            history=list(history) if history is not None else None,
            report=ReportNode.model_validate(report) if report is not None else None,
            parts=parts,
        )
        run.open_turns = open_turns_of(run.turns, branch)
        return run

    def _shown(self, run_id: str, status: str) -> str:
        return _owner.shown_status(run_id, status, self._owner, None, 0.0)

    def statuses(self, run_ids: Iterable[str]) -> dict[str, str]:
        """The status of each of `run_ids` the store holds (a run whose writer is gone is
        `"abandoned"`)."""
        with self._lock:
            headers = self._headers
            return {
                r: self._shown(r, headers[r]["status"])
                for r in dict.fromkeys(run_ids)
                if r in headers
            }

    def list_runs(self) -> list[dict[str, Any]]:
        """One summary per stored run, in the order they started."""
        with self._lock:
            out = []
            for run_id, header in self._headers.items():
                turns = [r.turn for r in self._records.get(run_id, {}).values()]
                shown = {**header, "status": self._shown(run_id, header["status"])}
                out.append(
                    summary_of(
                        shown,
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
            self._parts.pop(run_id, None)
            self._branch.pop(run_id, None)

    def fingerprints(self, key: str) -> list[dict[str, Any]]:
        """The fingerprint records an experiment kept for `key` (a workflow's variant),
        newest first (see `thena_nb.experiments`)."""
        with self._lock:
            return [copy.deepcopy(r) for r in reversed(self._fingerprints.get(key, {}).values())]

    def keep_fingerprint(self, key: str, record: dict[str, Any]) -> None:
        """Keep an experiment's fingerprint record for `key`, in place of the one with the
        same `record["digest"]`."""
        with self._lock:
            kept = self._fingerprints.setdefault(key, {})
            kept.pop(record["digest"], None)  # the newest last
            kept[record["digest"]] = copy.deepcopy(record)

    def __repr__(self) -> str:
        return f"MemoryRunStore(runs={len(self._headers)})"
