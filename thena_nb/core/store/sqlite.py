"""`SqliteRunStore`: runs kept in an SQLite file, turn by turn, with the stdlib `sqlite3`.

Each finished turn is one `INSERT`, committed on the calling (event-loop) thread before
`turn_recorded` returns, so before the executor starts the next turn (S28). In WAL mode
with `synchronous=NORMAL` such a commit is a write to the journal, no sync: it survives the
process being killed at any moment (not a power cut, which may lose the last few commits).
The one step that syncs, moving the journal into the database, runs on a thread of its own
every `CHECKPOINT_EVERY` commits. Several processes may write to one file at once; a writer
waits up to `busy_timeout` for another's commit, and a run is claimed by one writer before
its first turn (`core/store/_owner.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import TypeAdapter

from thena_nb.core.records.errors import StoreError
from thena_nb.core.records.report import ReportNode
from thena_nb.core.records.types import Message, Turn
from thena_nb.core.runs.run import Run
from thena_nb.core.store import _once, _owner
from thena_nb.core.store._batch import CommitBatch, settle
from thena_nb.core.store._sqlite_file import (
    BUSY_TIMEOUT_MS,
    NEXT_NUMBER,
    OLD_TURNS,
    TURN_BITS,
    next_number,
    old_turns,
    open_read_only,
    prepare,
    turn_key,
)
from thena_nb.core.store.base import (
    STORE_FORMAT,
    TurnRecord,
    decoding,
    missing_run,
    open_turns_of,
    rebuild_run,
    request_parts_of,
    summary_of,
)

__all__ = ["BUSY_TIMEOUT_MS", "CHECKPOINT_EVERY", "SqliteRunStore"]

_T = TypeVar("_T")

CHECKPOINT_EVERY = 500
"""Turn commits between two WAL checkpoints."""

_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
_TURNS: TypeAdapter[list[Turn]] = TypeAdapter(list[Turn])

_JSON_COLUMNS = ("usage", "stop_reasons", "output", "state", "pending")
_HEADER_COLUMNS = (
    "run_id",
    "format",
    "workflow",
    "input",
    "status",
    "started_at",
    "finished_at",
    "error",
    *_JSON_COLUMNS,
    "replay_diverged_at",
    "parent_run_id",
    "forked_at",
    "owner",
    "lease_until",
    "history",
    "report",
)


class SqliteRunStore:
    """A run store in an SQLite database: a file path, or a connection you opened.

    The file is created readable by its owner alone (mode 0600) and marked as a run store
    (`PRAGMA application_id`); tables (`thena_runs`, `thena_turn_rows`, `thena_request_parts`,
    `thena_branch_turns`) are created when it is opened, and an older file's turns move into
    `thena_turn_rows` then (format 2: older versions are told to upgrade to read it). An
    SQLite file of something else is refused, unchanged. A file that cannot be written
    (read-only, or in a read-only directory) opens read-only (`read_only`): its runs can be
    listed and loaded.

    A connection you pass should be the store's alone (the store commits its own
    transactions on it) and, if runs are loaded from other threads, allow that
    (`sqlite3.connect(..., check_same_thread=False)`). One lock guards the connection, so
    one store may serve many runs at once. Turns are written on the calling thread.

    Args:
        database: A path to the database file, or an open `sqlite3.Connection` (left open
            by `close()`).

    Raises:
        StoreError: The file cannot be opened, or is not a run store.

    Example:
        >>> from thena_nb import Agent, Workflow
        >>> import tempfile, pathlib
        >>> from thena_nb.store import SqliteRunStore
        >>> from thena_nb.models import ScriptedModel
        >>> wf = Workflow("hello", [Agent("A", model=ScriptedModel(["Hi!"]))])
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     with SqliteRunStore.from_path(pathlib.Path(tmp) / "runs.sqlite3") as store:
        ...         run = wf.run("hi", store=store)
        ...         store.load(run.run_id).turns[0].info.response
        'Hi!'
    """

    def __init__(self, database: sqlite3.Connection | str | os.PathLike[str]) -> None:
        self.path: Path | None
        self._lock = threading.Lock()
        self._closed = False
        self._commits = 0
        self._checkpointing: threading.Thread | None = None
        self._parts_written: dict[str, set[str]] = {}
        """The request parts written so far, by run (under the lock)."""
        self._numbers: dict[str, int] = {}
        """The number of each run claimed here (`thena_runs.run_no`), its turns' keys made
        from it (`turn_key`); set by the claim, dropped when the run ends."""
        self._owner = _owner.new_owner()
        self._renew_at = time.monotonic() + _owner.LEASE_S / 3  # claims start with a lease
        self._refused: set[str] = set()
        """Runs whose claim this store was refused: their ending is not its to write."""
        self._live: set[str] = set()
        """Runs started here and not yet ended: while there are several, writes are
        committed together, once per event-loop pass (`_batch`)."""
        self._batch = CommitBatch()
        self._fresh: set[str] = set()
        """Live runs whose rows this store made (a new id) and that wrote no branch turn:
        their ending needs no clean-up of rows from an earlier writer."""
        if isinstance(database, sqlite3.Connection):
            self._conn, self._owns, self.path = database, False, None
            self.read_only = not self._prepare(repr(self))
            self._old_turns = self.read_only and old_turns(database)
            return
        self.path = Path(database).expanduser()
        self._owns = True
        try:
            _create_private(self.path)
            self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the run store {str(self.path)!r}: {exc}") from exc
        self.read_only = not self._prepare(repr(str(self.path)))
        """The file cannot be written: runs can be listed and loaded, not stored."""
        if self.read_only:
            self._conn.close()
            self._conn = open_read_only(self.path, repr(str(self.path)))
        self._old_turns = self.read_only and old_turns(self._conn)
        """A read-only file of an older version, its turns in `OLD_TURNS`."""

    def _prepare(self, label: str) -> bool:
        try:
            return prepare(self._conn, label)
        except sqlite3.Error as exc:
            if self._owns:
                self._conn.close()
            raise StoreError(f"cannot open the run store {label}: {exc}") from exc
        except StoreError:
            if self._owns:
                self._conn.close()
            raise

    @classmethod
    @contextlib.contextmanager
    def from_path(cls, path: str | os.PathLike[str]) -> Iterator[SqliteRunStore]:
        """A store on the file at `path` (created if needed), closed when the block ends."""
        store = cls(path)
        try:
            yield store
        finally:
            store.close()

    def close(self) -> None:
        """Finish a checkpoint under way and close the connection, if the store opened it."""
        thread = self._checkpointing
        if thread is not None:
            thread.join()
        with self._lock:
            if not self._closed:
                self._flush_locked()
            if self._owns and not self._closed:
                self._conn.close()
            self._closed = True

    def __enter__(self) -> SqliteRunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = str(self.path) if self.path is not None else "connection"
        return f"SqliteRunStore({where!r})"

    # -- RunRecorder ----------------------------------------------------------------------

    async def run_started(self, run: Run) -> None:
        """Claim the run and write its header; a run id already stored (a resume) keeps its
        turns.

        Raises:
            RunInUse: Another writer is running this run now (this process or another).
        """
        run_id, header = run.run_id, run.header()
        what = f"start run {run_id!r}"
        # Committed before the first model call. A new id (the common case) is claimed by
        # one statement, without a transaction or savepoint of its own.
        new = await self._write(run_id, what, lambda c: self._claim_new(c, header), alone=True)
        if not new:
            new = await self._write(run_id, what, lambda c: self._claim(c, header))
        self._live.add(run_id)
        if new:  # (known only once the claim is committed)
            self._fresh.add(run_id)

    async def turn_recorded(self, run: Run, record: TurnRecord) -> None:
        """Commit the turn, its state snapshot and its messages (S28)."""
        if record.stored:
            return
        run_id = run.run_id
        what = f"store turn {record.turn.index} of run {run_id!r}"
        if not self._turn_alone(run, record):
            parts = request_parts_of(run, record.turn)
            await self._write(run_id, what, lambda c: self._turn_rows(c, run_id, record, parts))
            return
        # The common case, once per turn: one prepared statement (written here, not through
        # `_write`: a coroutine less a turn).
        values = _turn_values(self._numbers[run_id], record)
        if len(self._live) < 2:
            self._write_alone(what, lambda c: c.execute(_INSERT_TURN, values))
        else:
            await self._batched(what, lambda c: c.execute(_INSERT_TURN, values), alone=True)

    async def branch_turn_recorded(self, run: Run, record: TurnRecord) -> None:
        """Commit a parallel branch's turn as it finishes, while its block is still open
        (its index is the branch's own; the block's merge records it again as a run turn)."""
        run_id, turn = run.run_id, record.turn
        self._fresh.discard(run_id)  # its ending deletes its branch turns
        dumped = (STORE_FORMAT, _turn_json(turn), *_state_and_messages(record))
        with self._writing(f"store a branch turn of run {run_id!r}") as conn:
            conn.execute(_INSERT_BRANCH_TURN, (run_id, run_id, *dumped))
            self._insert_parts(conn, run_id, request_parts_of(run, turn))

    async def run_finished(self, run: Run) -> None:
        """Write how the run ended, with its history and report, and release the claim.

        Raises:
            StoreError: The ending could not be written. The run is then marked `"failed"`
                in the store, with this error, when that small write can be made; else it
                shows as `"abandoned"`, like the run of a process that died.
        """
        run_id = run.run_id
        self._parts_written.pop(run_id, None)
        if run_id in self._refused or not _owner.holds(self._owner, run_id):
            self._refused.discard(run_id)
            self._live.discard(run_id)
            self._numbers.pop(run_id, None)
            return  # not its run to end: its claim was refused, or it never started here
        try:
            values, what = self._ending(run), f"finish run {run_id!r}"
            fresh = run_id in self._fresh
            if fresh and run_id in self._numbers:  # its row is ours: one `UPDATE` of it
                ended = values[1]
                if await self._write(
                    run_id, what, lambda c: c.execute(_FINISH, ended).rowcount == 1, alone=True
                ):
                    return
            # Any other run (or a fresh one whose row is gone after all): its ending whole.
            await self._write(
                run_id, what, lambda c: _finish_rows(c, values, self._number_of(c, run_id), fresh)
            )
        except StoreError as exc:
            self._mark_failed(run_id, exc)
            raise
        finally:
            self._live.discard(run_id)
            self._fresh.discard(run_id)
            self._numbers.pop(run_id, None)
            _owner.release(self._owner, run_id)

    # -- reading --------------------------------------------------------------------------

    def load(self, run_id: str) -> Run:
        """The stored run, rebuilt (`run.workflow` is `None`).

        Raises:
            StoreError: No run `run_id` is stored, it is corrupt, or the store cannot be read.
        """
        with self._reading("load a run") as conn:
            row = conn.execute(_SELECT_HEADER, (run_id,)).fetchone()
            if row is None:
                known = [r[0] for r in conn.execute(_RECENT_IDS)]
                raise StoreError(missing_run(run_id, known[::-1]))
            finished = row[_HEADER_COLUMNS.index("finished_at")] is not None
            turns = (_SELECT_OLD_TURNS if self._old_turns else _SELECT_TURNS).format(
                "NULL" if finished else "t.messages"
            )
            rows = conn.execute(turns, (run_id,)).fetchall()
            parts = conn.execute(_SELECT_PARTS, (run_id,)).fetchall()
            done = row[_HEADER_COLUMNS.index("status")] == "finished"  # every block merged
            branch = [] if done else conn.execute(_SELECT_BRANCH, (run_id,)).fetchall()
        try:
            with decoding():  # (its records are no garbage: `decoding`)
                return self._rebuild(run_id, row, rows, parts, branch)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise StoreError(_corrupt(self, run_id, exc)) from exc

    def _rebuild(
        self,
        run_id: str,
        row: tuple[Any, ...],
        rows: list[tuple[Any, ...]],
        part_rows: list[tuple[str, str]],
        branch_rows: list[tuple[Any, ...]],
    ) -> Run:
        header = dict(zip(_HEADER_COLUMNS, row, strict=True))
        _check_format(header.pop("format"), f"run {run_id!r}")
        history, report = header.pop("history"), header.pop("report")
        owner, lease = header.pop("owner"), header.pop("lease_until")
        header["status"] = _owner.shown_status(run_id, header["status"], owner, lease, time.time())
        for name in _JSON_COLUMNS:
            text = header[name]
            header[name] = json.loads(text) if text is not None else None
        if rows or branch_rows:  # (the newest format of its turns: one check, not one each)
            _check_format(max(r[0] for r in (*rows, *branch_rows)), f"a turn of run {run_id!r}")
        records = _records(rows)
        run = rebuild_run(
            header,
            records,
            history=list(_read(history, [r.turn for r in records]))
            if history is not None
            else None,
            report=ReportNode.model_validate_json(report) if report is not None else None,
            parts={key: json.loads(value) for key, value in part_rows},
        )
        run.open_turns = open_turns_of(run.turns, [r.turn for r in _records(branch_rows)])
        return run

    def list_runs(self) -> list[dict[str, Any]]:
        """One summary per stored run, in the order they started (a run whose writer is
        gone shows as `"abandoned"`).

        Raises:
            StoreError: A run's row is corrupt (the error names it), or the store cannot be
                read.
        """
        with self._reading("list runs") as conn:
            rows = conn.execute(_LIST_OLD if self._old_turns else _LIST).fetchall()
        now = time.time()
        out = []
        for run_id, wf, text, status, reasons, started, finished, error, *rest in rows:
            parent, forked_at, owner, lease, *n = rest
            try:
                header = {
                    "run_id": run_id,
                    "workflow": wf,
                    "input": text,
                    "status": _owner.shown_status(run_id, status, owner, lease, now),
                    "stop_reasons": json.loads(reasons) if reasons else {},
                    "started_at": started,
                    "finished_at": finished,
                    "error": error,
                    "parent_run_id": parent,
                    "forked_at": forked_at,
                }
                out.append(summary_of(header, *n))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise StoreError(_corrupt(self, run_id, exc)) from exc
        return out

    def statuses(self, run_ids: Iterable[str]) -> dict[str, str]:
        """The status of each of `run_ids` the store holds, found by run id (an index), not
        by listing every run; a run whose writer is gone is `"abandoned"`."""
        wanted = list(dict.fromkeys(run_ids))
        found: dict[str, str] = {}
        now = time.time()
        with self._reading("look runs up") as conn:
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start : start + _CHUNK]
                marks = ", ".join("?" * len(chunk))
                query = f"{_STATUSES} ({marks})"
                for run_id, status, owner, lease in conn.execute(query, chunk):
                    found[run_id] = _owner.shown_status(run_id, status, owner, lease, now)
        return found

    def summaries(self, run_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """What an experiment's row of each of `run_ids` needs, read in bulk (a statement
        per 500 runs) without rebuilding the runs: no turn or message is validated, and a
        turn's tool calls are counted by SQLite, not decoded here.

        Keys: `run_id`, `status` (as `statuses` shows it), `error`, `started_at`,
        `finished_at` (ISO text), `usage` (a dict), `report` (the report tree as a dict),
        `turns`, `tool_calls`, `rescued_calls` and `failed_calls`. A run that cannot be
        summarised so (not stored, never ended, written in a newer format, in a file of an
        older version, or unreadable) is left out: `load` it, which says what is wrong.
        """
        if self._old_turns:
            return {}
        wanted = list(dict.fromkeys(run_ids))
        out: dict[str, dict[str, Any]] = {}
        now = time.time()
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            try:
                with self._reading("summarise runs") as conn:
                    query = _SUMMARIES.format(", ".join("?" * len(chunk)))
                    rows = conn.execute(query, chunk).fetchall()
            except StoreError:  # (malformed JSON in one of them): each is loaded instead
                continue
            for row in rows:
                with contextlib.suppress(ValueError, TypeError):
                    summary = _summary(row, now)
                    if summary is not None:
                        out[summary["run_id"]] = summary
        return out

    def delete(self, run_id: str) -> None:
        """Forget a run (nothing happens when there is no such run)."""
        with self._writing("delete a run") as conn:
            row = conn.execute(_SELECT_NUMBER, (run_id,)).fetchone()
            if row is not None and row[0] is not None:
                number = int(row[0])
                conn.execute(_DELETE_FROM, _from_turn(number, 0))
                conn.execute(_NUMBER_FREED, (number,))  # never given again
            for table in ("thena_request_parts", "thena_branch_turns"):
                conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM thena_runs WHERE run_id = ?", (run_id,))
            self._parts_written.pop(run_id, None)

    def fingerprints(self, key: str) -> list[dict[str, Any]]:
        """The fingerprint records an experiment kept for `key` (a workflow's variant),
        newest first (see `thena_nb.experiments`)."""
        with self._reading("read fingerprints") as conn:
            rows = conn.execute(_FINGERPRINTS, (key,)).fetchall()
        out = []
        for (text,) in rows:
            with contextlib.suppress(ValueError):  # unreadable: as if never kept
                out.append(json.loads(text))
        return out

    def keep_fingerprint(self, key: str, record: dict[str, Any]) -> None:
        """Keep an experiment's fingerprint record for `key`, in place of the one with the
        same `record["digest"]`."""
        values = (key, record["digest"], record.get("format", 1), json.dumps(record), time.time())
        with self._writing("keep a fingerprint") as conn:
            conn.execute(_KEEP_FINGERPRINT, values)

    # -- writing (on the calling thread, under the lock) ----------------------------------

    def _claim_new(self, conn: sqlite3.Connection, header: dict[str, Any]) -> bool:
        """Claim a run the file has no row of by one statement, its number given by the
        same statement; False, with nothing written, when the file has a row of it (or has
        given out every number): `_claim` then decides."""
        run_id = header["run_id"]
        if not _RETURNING or run_id in self._refused or not _owner.hold(self._owner, run_id):
            return False  # (`_claim` says why it is refused)
        try:
            rows = conn.execute(_START_NEW, (*_header_values(header), self._owner, _lease()))
            made = rows.fetchall()  # (all of it: a statement left stepping keeps a transaction)
        except BaseException:
            _owner.release(self._owner, run_id)
            raise
        if not made:
            _owner.release(self._owner, run_id)
            return False
        self._numbers[run_id] = int(made[0][0])
        return True

    def _claim(self, conn: sqlite3.Connection, header: dict[str, Any]) -> bool:
        """Claim the run and write its header (in a write transaction); True when the
        store had no row of it."""
        run_id = header["run_id"]
        status, owner, lease, number, next_number = conn.execute(
            _SELECT_OWNER, (run_id,)
        ).fetchone()
        found = status is not None  # (every row has a status)
        if found:
            taken = status == "running" and owner is not None and owner != self._owner
            if taken and _owner.owner_alive(owner, lease, time.time()):
                self._refused.add(run_id)
                raise _owner.RunInUse(run_id, owner, repr(self))
            refused, stored = _owner.refuses(status)
            if refused:
                self._refused.add(run_id)
                raise _owner.RunInUse(run_id, owner or "?", repr(self), status, stored=stored)
        if not _owner.hold(self._owner, run_id):
            self._refused.add(run_id)
            raise _owner.RunInUse(run_id, self._owner, repr(self))
        self._refused.discard(run_id)
        try:
            if number is None:
                number = next_number
                _check_number(number)
            conn.execute(_START, (*_header_values(header), number, self._owner, _lease()))
            self._numbers[run_id] = number
        except BaseException:
            self._numbers.pop(run_id, None)
            _owner.release(self._owner, run_id)
            raise
        return not found

    def _turn_alone(self, run: Run, record: TurnRecord) -> bool:
        """Whether the turn's row is all its write holds: no stale turns to delete, no
        request parts not yet written, no leases due for renewal."""
        if record.drop_from is not None or time.monotonic() >= self._renew_at:
            return False
        run_id = run.run_id
        if run_id not in self._numbers:  # (not claimed here: `_turn_rows` looks it up)
            return False
        request = record.turn.__dict__["request"]  # plain reads: a turn each
        if request is None:
            return True
        written = self._parts_written.get(run_id, ())
        parts = run.request_parts  # (a part the run's table lacks is not written)
        for key in (request.system, request.tools):
            if key not in written and key in parts:
                return False
        return True

    def _write_alone(self, what: str, write: Callable[[sqlite3.Connection], _T]) -> _T:
        """`write` of one statement, committed at once: its own transaction, as SQLite
        makes one for a statement outside any (a statement that fails leaves no change)."""
        with self._lock:
            conn = self._conn
            if self._closed or self.read_only:
                raise StoreError(self._cannot_write(what))
            if self._batch.loop is not None:
                self._flush_locked()
            try:
                done = write(conn)
                if conn.in_transaction:  # a connection passed in may open one implicitly
                    conn.commit()
            except sqlite3.Error as exc:
                _rollback(conn)
                raise StoreError(f"{self!r} cannot {what}: {exc}") from exc
            self._commits += 1
            if self._commits >= CHECKPOINT_EVERY:
                self._start_checkpoint()
            return done

    async def _write(
        self,
        run_id: str,
        what: str,
        write: Callable[[sqlite3.Connection], _T],
        *,
        alone: bool = False,
    ) -> _T:
        """`write`'s result, once it is committed: at once while run `run_id` is the only
        one going on here (`alone`: one statement, its own transaction; else a transaction
        of its own), else in the open batch with the other runs' writes (`_batched`)."""
        if len(self._live) <= (run_id in self._live):
            if alone:
                return self._write_alone(what, write)
            with self._writing(what) as conn:
                return write(conn)
        done: list[_T] = []
        await self._batched(what, lambda c: done.append(write(c)), alone=alone)
        return done[0]

    def _turn_rows(
        self, conn: sqlite3.Connection, run_id: str, record: TurnRecord, parts: dict[str, Any]
    ) -> None:
        """A turn's statements (in a write transaction): stale turns deleted, request parts
        not yet written, the turn, and the leases renewed when they are due."""
        number = self._number_of(conn, run_id)
        if record.drop_from is not None:
            conn.execute(_DELETE_FROM, _from_turn(number, record.drop_from))
        self._insert_parts(conn, run_id, parts)
        conn.execute(_INSERT_TURN, _turn_values(number, record))
        if time.monotonic() >= self._renew_at:
            self._renew(conn)

    def _insert_parts(self, conn: sqlite3.Connection, run_id: str, parts: dict[str, Any]) -> None:
        written = self._parts_written.setdefault(run_id, set())
        new = [k for k in parts if k not in written]
        if new:
            conn.executemany(_INSERT_PART, _part_rows(run_id, parts, new))
            written.update(new)

    def _number_of(self, conn: sqlite3.Connection, run_id: str) -> int:
        """The run's number (in a write transaction): known since its claim, else looked up,
        else given now."""
        number = self._numbers.get(run_id)
        if number is None:
            number = self._numbers[run_id] = _number(conn, run_id)
        return number

    def _forget_writes(self) -> None:
        """After a write was undone: what this store remembers writing may not be there (the
        numbers are looked up again; a run's own stays, as its claim was committed)."""
        self._parts_written.clear()
        self._numbers.clear()

    def _renew(self, conn: sqlite3.Connection) -> None:
        """Renew the leases of this store's open runs (every third of a lease at most)."""
        self._renew_at = time.monotonic() + _owner.LEASE_S / 3
        conn.execute(_RENEW, (_lease(), self._owner))

    def _ending(self, run: Run) -> _Ending:
        """The run's ending as the values `_finish_rows` writes.

        Raises:
            StoreError: Part of it cannot be written as JSON.
        """
        header, final = run.header(), run.ending()
        try:
            stored = list(_once.stored_messages(run.history, run.turns))  # results once
            history = _messages_json(stored)
            report = run.report.model_dump_json(exclude_defaults=True)  # `inf` as `Infinity`
            dumped = {name: _json(final[name]) for name in _JSON_COLUMNS}
        except (ValueError, TypeError, OverflowError) as exc:
            what = f"{self!r} cannot write the ending of run {run.run_id!r}: {exc}"
            raise StoreError(what) from exc
        ending = (
            final["status"],
            final["finished_at"],
            final["error"],
            *(dumped[name] for name in _JSON_COLUMNS),
            history,
            report,
            final["replay_diverged_at"],
            header["run_id"],
        )
        return _header_values(header), ending, len(run.turns), final["status"] == "finished"

    def _mark_failed(self, run_id: str, exc: StoreError) -> None:
        """After a failed final write: say so loudly, and mark the stored run `"failed"`
        with the error if that much can still be written."""
        note = f"the run's ending could not be stored: {exc}"
        warnings.warn(
            f"thena_nb: run {run_id!r} is not complete in {self!r}: {note}. Its turns are "
            f"kept; resume it with `wf.resume({run_id!r})`",
            RuntimeWarning,
            stacklevel=3,
        )
        with contextlib.suppress(StoreError), self._writing(f"mark {run_id!r} failed") as conn:
            conn.execute(_MARK_FAILED, (f"StoreError: {note}", run_id, self._owner))

    def _start_checkpoint(self) -> None:
        """Move the WAL into the database on a thread of its own (call with the lock held)."""
        self._commits = 0
        thread = self._checkpointing
        if thread is not None and thread.is_alive():
            return
        self._checkpointing = threading.Thread(
            target=self._checkpoint, name="thena_nb-checkpoint", daemon=True
        )
        self._checkpointing.start()

    def _checkpoint(self) -> None:
        with contextlib.suppress(sqlite3.Error):  # busy elsewhere: the next one will do
            if self.path is not None:  # its own connection: turns go on being written
                conn = sqlite3.connect(self.path, isolation_level=None)
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                finally:
                    conn.close()
                return
            with self._lock:
                if not self._closed:
                    self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    # -- the connection -------------------------------------------------------------------

    def _cannot_write(self, what: str) -> str:
        if self._closed:
            return f"{self!r} is closed"
        return (
            f"{self!r} cannot {what}: it is read-only (the file or its directory cannot be "
            "written); its runs can be listed and loaded. Give a writable store to keep runs"
        )

    @contextlib.contextmanager
    def _writing(self, what: str) -> Iterator[sqlite3.Connection]:
        """One write transaction, taking the database's write lock at once."""
        with self._lock:
            if self._closed or self.read_only:
                raise StoreError(self._cannot_write(what))
            if self._batch.loop is not None:
                self._flush_locked()
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"{self!r} cannot {what}: {exc}") from exc
            try:
                yield conn
                conn.commit()
            except sqlite3.Error as exc:
                _rollback(conn)
                self._forget_writes()  # some may be marked written, and are not
                raise StoreError(f"{self!r} cannot {what}: {exc}") from exc
            except BaseException:
                _rollback(conn)
                self._forget_writes()
                raise

    async def _batched(
        self, what: str, write: Callable[[sqlite3.Connection], object], *, alone: bool = False
    ) -> None:
        """Make `write` part of the open batch (opening one if needed) and return once the
        batch is committed (`_batch`): a write that fails is undone alone, by its savepoint
        or, for a write of one statement (`alone`), by SQLite (a statement that fails
        leaves no change behind)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._closed or self.read_only:
                raise StoreError(self._cannot_write(what))
            conn = self._conn
            try:
                if self._batch.loop is not loop:
                    self._flush_locked()  # (another loop's, from another thread)
                    conn.execute("BEGIN IMMEDIATE")
                    self._batch.start(loop, self._commit_batch)
                if not alone:
                    conn.execute("SAVEPOINT thena_write")
            except sqlite3.Error as exc:
                raise StoreError(f"{self!r} cannot {what}: {exc}") from exc
            try:
                write(conn)
                if not alone:
                    conn.execute("RELEASE thena_write")
            except BaseException as exc:
                if not alone:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK TO thena_write")
                        conn.execute("RELEASE thena_write")
                self._forget_writes()
                if not conn.in_transaction:  # SQLite rolled the whole batch back: say so
                    self._flush_locked()
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(f"{self!r} cannot {what}: {exc}") from exc
                raise
            committed = self._batch.join()
        await committed

    def _commit_batch(self) -> None:
        """The open batch's commit, run by its loop after the writes of one pass."""
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        """Commit the open batch, if any, and wake its writers (call with the lock held)."""
        loop, waiters = self._batch.take()
        if loop is None:
            return
        try:
            if not self._conn.in_transaction:  # an error (a full disk) rolled it all back
                raise sqlite3.OperationalError("the transaction was rolled back")
            self._conn.commit()
        except sqlite3.Error as exc:
            _rollback(self._conn)
            self._forget_writes()
            made = f"{len(waiters)} write{'s' if len(waiters) != 1 else ''}"
            text = f"{self!r} cannot commit {made} of runs going on together: {exc}"
            settle(loop, waiters, lambda: StoreError(text))
            return
        settle(loop, waiters, None)
        self._commits += 1
        if self._commits >= CHECKPOINT_EVERY:
            self._start_checkpoint()

    @contextlib.contextmanager
    def _reading(self, what: str) -> Iterator[sqlite3.Connection]:
        """One read transaction, so that a run's header and turns are from one moment."""
        with self._lock:
            if self._closed:
                raise StoreError(f"{self!r} is closed")
            if self._batch.loop is not None:
                self._flush_locked()
            conn = self._conn
            try:
                conn.execute("BEGIN")
            except sqlite3.Error as exc:
                raise StoreError(f"{self!r} cannot {what}: {exc}") from exc
            try:
                yield conn
            except sqlite3.Error as exc:
                raise StoreError(f"{self!r} cannot {what}: {exc}") from exc
            finally:
                _rollback(conn)


_INSERT_TURN = (
    "INSERT OR REPLACE INTO thena_turn_rows (turn_key, format, request_key, input_tokens, "
    "output_tokens, turn, state, messages) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_SELECT_NUMBER = "SELECT run_no FROM thena_runs WHERE run_id = ?"
_FINGERPRINTS = "SELECT record FROM thena_fingerprints WHERE key = ? ORDER BY written_at DESC"
_KEEP_FINGERPRINT = (
    "INSERT OR REPLACE INTO thena_fingerprints (key, digest, format, record, written_at) "
    "VALUES (?, ?, ?, ?, ?)"
)
_RUN_TURNS = f"t.turn_key >= r.run_no << {TURN_BITS} AND t.turn_key < (r.run_no + 1) << {TURN_BITS}"
"""The turns of run `r` (a range of the turn table's rowid)."""
_INSERT_BRANCH_TURN = (
    "INSERT INTO thena_branch_turns (run_id, seq, format, turn, state, messages) VALUES (?, "
    "(SELECT coalesce(max(seq), -1) + 1 FROM thena_branch_turns WHERE run_id = ?), ?, ?, ?, ?)"
)
_DELETE_BRANCH = "DELETE FROM thena_branch_turns WHERE run_id = ?"
_INSERT_PART = "INSERT OR IGNORE INTO thena_request_parts (run_id, key, value) VALUES (?, ?, ?)"
_DELETE_FROM = "DELETE FROM thena_turn_rows WHERE turn_key >= ? AND turn_key < ?"
_RECENT_IDS = "SELECT run_id FROM thena_runs ORDER BY started_at DESC, rowid DESC LIMIT 5"
_SELECT_HEADER = f"SELECT {', '.join(_HEADER_COLUMNS)} FROM thena_runs WHERE run_id = ?"
_SELECT_TURNS = (
    "SELECT t.format, t.turn, t.state, {} FROM thena_runs r JOIN thena_turn_rows t "
    f"ON {_RUN_TURNS} WHERE r.run_id = ? ORDER BY t.turn_key"
)
_SELECT_OLD_TURNS = (
    f"SELECT format, turn, state, {{}} FROM {OLD_TURNS} t WHERE run_id = ? ORDER BY idx"
)
_SELECT_PARTS = "SELECT key, value FROM thena_request_parts WHERE run_id = ?"
_SELECT_BRANCH = (
    "SELECT format, turn, state, messages FROM thena_branch_turns WHERE run_id = ? ORDER BY seq"
)
_SELECT_OWNER = (
    f"SELECT r.status, r.owner, r.lease_until, r.run_no, {NEXT_NUMBER} "
    "FROM (SELECT 1) LEFT JOIN thena_runs r ON r.run_id = ?"
)
"""A run's claim, its number, and the number a new run gets: one row, `NULL`s for a run
the store has no row of."""
_NUMBER_FREED = "INSERT OR IGNORE INTO thena_deleted_numbers (run_no) VALUES (?)"
_STATUSES = "SELECT run_id, status, owner, lease_until FROM thena_runs WHERE run_id IN"
_CHUNK = 500
"""Run ids per lookup statement (SQLite allows 32,766 parameters; older builds 999)."""
_SUMMARIES = (
    "SELECT r.run_id, r.format, r.status, r.owner, r.lease_until, r.started_at, r.finished_at, "
    "r.error, r.usage, r.report, count(DISTINCT t.turn_key), max(t.format), count(c.key), "
    "total(json_extract(c.value, '$.source') = 'rescued'), "
    "total(json_extract(c.value, '$.ok') = 0) "
    f"FROM thena_runs r LEFT JOIN thena_turn_rows t ON {_RUN_TURNS} "
    "LEFT JOIN json_each(t.turn, '$.tool_calls') c "
    "WHERE r.run_id IN ({}) GROUP BY r.run_id"
)
"""What `summaries` reads of each run: its header's columns that a row needs, and its turns
and their tool calls counted (a call's fields at their defaults are not stored: `source`
`"native"`, `ok` `None`)."""
_LIST_COLUMNS = (
    "SELECT r.run_id, r.workflow, r.input, r.status, r.stop_reasons, r.started_at, "
    "r.finished_at, r.error, r.parent_run_id, r.forked_at, r.owner, r.lease_until, "
    "count(t.format), coalesce(sum(t.input_tokens), 0), coalesce(sum(t.output_tokens), 0) "
    "FROM thena_runs r "
)
_LIST = (
    f"{_LIST_COLUMNS}LEFT JOIN thena_turn_rows t ON {_RUN_TURNS} "
    "GROUP BY r.run_id ORDER BY r.started_at, r.rowid"
)
_LIST_OLD = (
    f"{_LIST_COLUMNS}LEFT JOIN {OLD_TURNS} t ON t.run_id = r.run_id "
    "GROUP BY r.run_id ORDER BY r.started_at, r.rowid"
)
_COLUMNS = "run_id, format, workflow, input, status, started_at, parent_run_id, forked_at"
_START = (
    f"INSERT INTO thena_runs ({_COLUMNS}, run_no, owner, lease_until) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run_id) DO UPDATE SET "
    "format = excluded.format, workflow = excluded.workflow, "
    "input = excluded.input, status = excluded.status, finished_at = NULL, "
    "error = NULL, usage = NULL, stop_reasons = NULL, output = NULL, state = NULL, "
    "pending = NULL, history = NULL, report = NULL, replay_diverged_at = NULL, "
    "parent_run_id = excluded.parent_run_id, forked_at = excluded.forked_at, "
    "run_no = excluded.run_no, owner = excluded.owner, lease_until = excluded.lease_until"
)
_START_NEW = (
    f"INSERT INTO thena_runs ({_COLUMNS}, run_no, owner, lease_until) "
    "SELECT ?, ?, ?, ?, ?, ?, ?, ?, n, ?, ? "
    f"FROM (SELECT {NEXT_NUMBER} AS n) WHERE n < {1 << (63 - TURN_BITS)} "
    "ON CONFLICT (run_id) DO NOTHING RETURNING run_no"
)
"""A new run's claim (`_START` for a run id the file has no row of): its number is the next
one (`NEXT_NUMBER`); no row is made, and none returned, when the id has a row or the file
has given out every number."""
_RETURNING = sqlite3.sqlite_version_info >= (3, 35, 0)
"""Whether the SQLite library has `RETURNING` (3.35): with an older one a new run is claimed
as any other (`_claim`)."""
_INSERT_HEADER = (
    f"INSERT INTO thena_runs ({_COLUMNS}, run_no) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run_id) DO NOTHING"
)
_FINISH = (
    "UPDATE thena_runs SET status = ?, finished_at = ?, error = ?, usage = ?, "
    "stop_reasons = ?, output = ?, state = ?, pending = ?, history = ?, report = ?, "
    "replay_diverged_at = ?, lease_until = NULL WHERE run_id = ?"
)
_MARK_FAILED = (
    "UPDATE thena_runs SET status = 'failed', error = ?, lease_until = NULL "
    "WHERE run_id = ? AND owner = ? AND status = 'running'"
)
_RENEW = "UPDATE thena_runs SET lease_until = ? WHERE owner = ? AND status = 'running'"


_Ending = tuple[tuple[Any, ...], tuple[Any, ...], int, bool]
"""A run's ending as `SqliteRunStore._ending` gives it: its header row, its ending row, its
turn count, and whether it finished (so that its branch turns can go)."""


def _finish_rows(
    conn: sqlite3.Connection, ending: _Ending, number: int, fresh: bool = False
) -> None:
    """A run's ending (in a write transaction): its header if it is not there yet, how it
    ended, and no stored turn past its last one. A `fresh` run (its row made by this store,
    no branch turn written) has nothing to clean up."""
    header, values, turns, finished = ending
    if not fresh:
        conn.execute(_INSERT_HEADER, (*header, number))
    if conn.execute(_FINISH, values).rowcount == 0:  # its row is not there after all
        conn.execute(_INSERT_HEADER, (*header, number))  # (its number: its turns' keys)
        conn.execute(_FINISH, values)
    if fresh:
        return
    conn.execute(_DELETE_FROM, _from_turn(number, turns))
    if finished:  # else a resume may still reuse them
        conn.execute(_DELETE_BRANCH, (header[0],))


def _number(conn: sqlite3.Connection, run_id: str) -> int:
    """The run's number (`thena_runs.run_no`), given now if an older writer left it none (in
    a write transaction).

    Raises:
        StoreError: The run's row is gone (deleted while the run went on).
    """
    row = conn.execute(_SELECT_NUMBER, (run_id,)).fetchone()
    if row is None:
        raise StoreError(
            f"run {run_id!r} is no longer in the store (deleted while it ran): its turns "
            "cannot be stored. Run it again"
        )
    if row[0] is not None:
        return int(row[0])
    number = next_number(conn)
    _check_number(number)
    conn.execute("UPDATE thena_runs SET run_no = ? WHERE run_id = ?", (number, run_id))
    return number


def _check_number(number: int) -> None:
    if number >> (63 - TURN_BITS):
        raise sqlite3.OperationalError("the file has given out every run number (2**31)")


def _from_turn(number: int, index: int) -> tuple[int, int]:
    """The keys of run `number`'s turns from `index` on, as `_DELETE_FROM` takes them."""
    return turn_key(number, index), turn_key(number + 1, 0)


def _turn_values(number: int, record: TurnRecord) -> tuple[Any, ...]:
    turn = record.turn
    t = turn.__dict__  # plain reads: a turn each
    index = t["index"]
    if index >> TURN_BITS:
        raise StoreError(f"turn {index} cannot be stored: a run stores 2**{TURN_BITS} turns")
    return (
        number << TURN_BITS | index,  # (`turn_key`, written out: a turn each)
        STORE_FORMAT,
        t["request_key"],
        t["input_tokens"],
        t["output_tokens"],
        _turn_json(turn),
        *_state_and_messages(record),
    )


def _turn_json(turn: Turn) -> str:
    """A turn's row text: its fields at their defaults are left out (about half the bytes,
    and fewer pages to write per turn); loading fills them in, and rows that spell every
    field out, as earlier versions wrote them, load the same."""
    # (the serializer itself: `model_dump_json` passes it every option, a turn's write each)
    return turn.__pydantic_serializer__.to_json(turn, exclude_defaults=True).decode()


def _messages_json(messages: list[Message]) -> str:
    """Messages as row text, their fields at defaults left out (`_turn_json`)."""
    return _MESSAGES.serializer.to_json(messages, exclude_defaults=True).decode()


_json = json.JSONEncoder(ensure_ascii=False).encode
"""`json.dumps(value, ensure_ascii=False)`, without making an encoder on every call."""


def _lease() -> float:
    return time.time() + _owner.LEASE_S


def _state_and_messages(record: TurnRecord) -> tuple[str | None, str]:
    state = record.state
    return (
        _json(state) if state is not None else None,
        _messages_json(list(_once.stored_messages(record.messages, [record.turn]))),
    )


def _records(rows: list[tuple[Any, ...]]) -> list[TurnRecord]:
    # One validation of every turn at once costs far less than one per turn.
    turns = _TURNS.validate_json(f"[{','.join(r[1] for r in rows)}]")
    return [
        TurnRecord(
            turn,
            json.loads(state) if state is not None else None,
            _read(messages, [turn]) if messages is not None else (),  # (an ended run's: none)
        )
        for turn, (_, _, state, messages) in zip(turns, rows, strict=True)
    ]


def _read(messages: str | None, turns: list[Turn]) -> tuple[Message, ...]:
    """Stored messages, with the tool results stored once put back (`_once`)."""
    if messages is None:
        return ()
    out = _MESSAGES.validate_json(messages)
    if _once.MARK_JSON in messages:
        out = _once.expanded(out, _once.calls_of(turns))
    return tuple(out)


def _summary(row: tuple[Any, ...], now: float) -> dict[str, Any] | None:
    """A row of `_SUMMARIES` as `summaries` gives it; `None` for a run it cannot summarise.

    Raises:
        ValueError, TypeError: A JSON column cannot be read.
    """
    run_id, fmt, status, owner, lease, started, finished, error, usage, report, *counts = row
    turns, turn_format, calls, rescued, failed = counts
    if usage is None or report is None or fmt > STORE_FORMAT or (turn_format or 0) > STORE_FORMAT:
        return None  # never ended (rebuilt from its turns by `load`), or newer than this
    return {
        "run_id": run_id,
        "status": _owner.shown_status(run_id, status, owner, lease, now),
        "error": error,
        "started_at": started,
        "finished_at": finished,
        "usage": json.loads(usage),
        "report": json.loads(report),
        "turns": turns,
        "tool_calls": calls,
        "rescued_calls": int(rescued),
        "failed_calls": int(failed),
    }


def _corrupt(store: SqliteRunStore, run_id: str, exc: Exception) -> str:
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return (
        f"run {run_id!r} in {store!r} is corrupt and cannot be read ({type(exc).__name__}: "
        f"{detail[:200]}). Delete it with `store.delete({run_id!r})`, or run it again"
    )


def _header_values(header: dict[str, Any]) -> tuple[Any, ...]:
    return (
        header["run_id"],
        STORE_FORMAT,
        header["workflow"],
        header["input"],
        header["status"],
        header["started_at"],
        header.get("parent_run_id"),
        header.get("forked_at"),
    )


_PART_TEXTS: dict[str, tuple[object, str]] = {}
"""The row text of each request part written lately, by key, with the value it was made
from: every run of an agent writes the same parts again, the same objects (the agent keeps
them, `records._sent`); a value that is not the very object kept is encoded again."""
_PART_TEXTS_KEPT = 256


def _part_rows(run_id: str, parts: dict[str, Any], keys: list[str]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for k in keys:
        value = parts[k]
        kept = _PART_TEXTS.get(k)
        if kept is not None and kept[0] is value:
            text = kept[1]
        else:
            text = _json(value)
            if len(_PART_TEXTS) >= _PART_TEXTS_KEPT:
                _PART_TEXTS.clear()
            _PART_TEXTS[k] = (value, text)
        rows.append((run_id, k, text))
    return rows


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.rollback()


def _check_format(fmt: int, what: str) -> None:
    if fmt > STORE_FORMAT:
        raise StoreError(
            f"{what} was stored in format {fmt}, newer than this thena_nb reads "
            f"({STORE_FORMAT}); upgrade thena_nb to read it"
        )


def _create_private(path: Path) -> None:
    """Create the database file readable and writable by its owner alone (mode 0600).

    SQLite gives its `-wal` and `-shm` files the database file's mode.
    """
    if str(path) == ":memory:" or path.exists():
        return
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    os.close(fd)
