"""`SqliteRunStore`: runs kept in an SQLite file, turn by turn, with the stdlib `sqlite3`.

Writes run on the store's own writer thread, off the event loop, and each turn is committed
before `turn_recorded` returns.

Each finished turn is committed before the executor starts the next one (S28), in WAL mode
with `synchronous=NORMAL`: a commit survives the process being killed at any moment (not a
power cut, which may lose the last few commits). Several processes may write to one file at
once; a writer waits up to `busy_timeout` for another's commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import TypeAdapter

from thena_nb.core.errors import StoreError
from thena_nb.core.report import ReportNode
from thena_nb.core.run import Run
from thena_nb.core.store.base import (
    STORE_FORMAT,
    TurnRecord,
    missing_run,
    rebuild_run,
    request_parts_of,
    summary_of,
)
from thena_nb.core.types import Message, Turn

__all__ = ["BUSY_TIMEOUT_MS", "CHECKPOINT_EVERY", "SqliteRunStore"]

_T = TypeVar("_T")

BUSY_TIMEOUT_MS = 10_000
"""How long a write waits for another process's write to finish."""
CHECKPOINT_EVERY = 500
"""Turn commits between two WAL checkpoints."""

_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
_TURNS: TypeAdapter[list[Turn]] = TypeAdapter(list[Turn])

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS thena_runs (
        run_id TEXT PRIMARY KEY,
        format INTEGER NOT NULL,
        workflow TEXT NOT NULL,
        input TEXT NOT NULL,
        status TEXT NOT NULL,
        started_at TEXT NOT NULL,
        finished_at TEXT,
        error TEXT,
        usage TEXT,
        stop_reasons TEXT,
        output TEXT,
        state TEXT,
        history TEXT,
        report TEXT,
        replay_diverged_at INTEGER,
        parent_run_id TEXT,
        forked_at INTEGER,
        pending TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS thena_turns (
        run_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        format INTEGER NOT NULL,
        request_key TEXT,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        turn TEXT NOT NULL,
        state TEXT,
        messages TEXT NOT NULL,
        PRIMARY KEY (run_id, idx)
    )""",
    # Newer than the first files: an older file gains it when it is opened.
    """CREATE TABLE IF NOT EXISTS thena_request_parts (
        run_id TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (run_id, key)
    )""",
)

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
    "history",
    "report",
)
_ADDED_COLUMNS = (("parent_run_id", "TEXT"), ("forked_at", "INTEGER"), ("pending", "TEXT"))
"""Columns newer than the first files: added to an older file when it is opened."""


class SqliteRunStore:
    """A run store in an SQLite database: a file path, or a connection you opened.

    The file is created readable by its owner alone (mode 0600); tables (`thena_runs`,
    `thena_turns`, `thena_request_parts`) are created on first use. A connection you pass
    must allow use from other threads (`sqlite3.connect(..., check_same_thread=False)`):
    writes run in a worker thread, off the event loop, and it should be the store's alone
    (the store commits its own transactions on it). One lock guards the connection, so one
    store may serve many runs at once.

    Args:
        database: A path to the database file, or an open `sqlite3.Connection` (left open
            by `close()`).

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
        if isinstance(database, sqlite3.Connection):
            self._conn = database
            self._owns = False
            self.path = None
        else:
            self.path = Path(database).expanduser()
            self._owns = True
            try:
                _create_private(self.path)
                self._conn = sqlite3.connect(
                    self.path, check_same_thread=False, isolation_level=None
                )
            except (OSError, sqlite3.Error) as exc:
                raise StoreError(f"cannot open the run store {str(self.path)!r}: {exc}") from exc
        self._lock = threading.Lock()
        self._writer = _Writer(after=self._checkpoint)
        self._commits = 0
        self._parts_written: dict[str, set[str]] = {}
        """The request parts written so far, by run (writer thread, under the lock)."""
        self._ready = False
        self._closed = False

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
        """Stop the writer thread and close the connection, if the store opened it."""
        self._writer.stop()
        with self._lock:
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
        """Write the run's header; a run id already stored (a resume) keeps its turns."""
        await self._writer.run(self._write_start, run.header())

    async def turn_recorded(self, run: Run, record: TurnRecord) -> None:
        """Commit the turn, its state snapshot and its messages (S28)."""
        if not record.stored:
            parts = request_parts_of(run, record.turn)
            await self._writer.run(self._write_turn, run.run_id, record, parts)

    async def run_finished(self, run: Run) -> None:
        """Write how the run ended, with its history and report.

        This one write is made on the calling thread: the session hands the run back to its
        caller as soon as this is called, and the stored run must be complete by then.
        """
        with self._lock:
            self._parts_written.pop(run.run_id, None)
        history = _MESSAGES.dump_json(run.history).decode()
        # Through `json.dumps`, as `Run.to_json` does, so that `max_fails=inf` stays `inf`.
        report = json.dumps(run.report.model_dump(mode="json"), ensure_ascii=False)
        self._write_finish(run.header(), run.ending(), len(run.turns), history, report)

    # -- reading --------------------------------------------------------------------------

    def load(self, run_id: str) -> Run:
        """The stored run, rebuilt (`run.workflow` is `None`).

        Raises:
            StoreError: No run `run_id` is stored, or the store cannot be read.
        """
        with self._reading("load a run") as conn:
            row = conn.execute(
                f"SELECT {', '.join(_HEADER_COLUMNS)} FROM thena_runs WHERE run_id = ?",
                (run_id,),
            ).fetchone()
            if row is None:
                known = [r[0] for r in conn.execute(_RECENT_IDS)]
                raise StoreError(missing_run(run_id, known[::-1]))
            finished = row[-2] is not None  # the history is stored once the run has ended
            rows = conn.execute(
                f"SELECT format, turn, state, {'NULL' if finished else 'messages'} "
                "FROM thena_turns WHERE run_id = ? ORDER BY idx",
                (run_id,),
            ).fetchall()
            parts = {
                key: json.loads(value)
                for key, value in conn.execute(
                    "SELECT key, value FROM thena_request_parts WHERE run_id = ?", (run_id,)
                )
            }
        header = dict(zip(_HEADER_COLUMNS, row, strict=True))
        _check_format(header.pop("format"), f"run {run_id!r}")
        history, report = header.pop("history"), header.pop("report")
        for name in _JSON_COLUMNS:
            text = header[name]
            header[name] = json.loads(text) if text is not None else None
        for fmt, *_ in rows:
            _check_format(fmt, f"a turn of run {run_id!r}")
        # One validation of every turn at once costs far less than one per turn.
        turns = _TURNS.validate_json(f"[{','.join(r[1] for r in rows)}]")
        records = [
            TurnRecord(
                turn,
                json.loads(state) if state is not None else None,
                _MESSAGES.validate_json(messages) if messages is not None else (),
            )
            for turn, (_, _, state, messages) in zip(turns, rows, strict=True)
        ]
        return rebuild_run(
            header,
            records,
            history=_MESSAGES.validate_json(history) if history is not None else None,
            report=ReportNode.model_validate_json(report) if report is not None else None,
            parts=parts,
        )

    def list_runs(self) -> list[dict[str, Any]]:
        """One summary per stored run, in the order they started."""
        with self._reading("list runs") as conn:
            rows = conn.execute(
                "SELECT r.run_id, r.workflow, r.input, r.status, r.stop_reasons, r.started_at, "
                "r.finished_at, r.error, count(t.idx), coalesce(sum(t.input_tokens), 0), "
                "coalesce(sum(t.output_tokens), 0) FROM thena_runs r "
                "LEFT JOIN thena_turns t ON t.run_id = r.run_id "
                "GROUP BY r.run_id ORDER BY r.started_at, r.rowid"
            ).fetchall()
        out = []
        for run_id, wf, text, status, reasons, started, finished, error, n, i, o in rows:
            header = {
                "run_id": run_id,
                "workflow": wf,
                "input": text,
                "status": status,
                "stop_reasons": json.loads(reasons) if reasons else {},
                "started_at": started,
                "finished_at": finished,
                "error": error,
            }
            out.append(summary_of(header, n, i, o))
        return out

    def delete(self, run_id: str) -> None:
        """Forget a run (nothing happens when there is no such run)."""
        with self._writing("delete a run") as conn:
            conn.execute("DELETE FROM thena_turns WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM thena_request_parts WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM thena_runs WHERE run_id = ?", (run_id,))
            self._parts_written.pop(run_id, None)

    # -- writing (on a worker thread, under the lock) ---------------------------------------

    def _write_start(self, header: dict[str, Any]) -> None:
        with self._writing("start a run") as conn:
            conn.execute(
                "INSERT INTO thena_runs (run_id, format, workflow, input, status, started_at, "
                "parent_run_id, forked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id) DO UPDATE SET "
                "format = excluded.format, workflow = excluded.workflow, "
                "input = excluded.input, status = excluded.status, finished_at = NULL, "
                "error = NULL, usage = NULL, stop_reasons = NULL, output = NULL, state = NULL, "
                "pending = NULL, "
                "history = NULL, report = NULL, replay_diverged_at = NULL, "
                "parent_run_id = excluded.parent_run_id, forked_at = excluded.forked_at",
                _header_values(header),
            )

    def _write_turn(self, run_id: str, record: TurnRecord, parts: dict[str, Any]) -> None:
        turn, state = record.turn, record.state
        values = (
            run_id,
            turn.index,
            STORE_FORMAT,
            turn.request_key,
            turn.input_tokens,
            turn.output_tokens,
            turn.model_dump_json(),
            json.dumps(state, ensure_ascii=False) if state is not None else None,
            _MESSAGES.dump_json(list(record.messages)).decode(),
        )
        written = self._parts_written.get(run_id)
        new = [k for k in parts if written is None or k not in written]
        if record.drop_from is not None or new:
            with self._writing(f"store turn {turn.index}") as conn:
                if record.drop_from is not None:
                    conn.execute(_DELETE_FROM, (run_id, record.drop_from))
                conn.executemany(_INSERT_PART, _part_rows(run_id, parts, new))
                conn.execute(_INSERT_TURN, values)
            self._parts_written.setdefault(run_id, set()).update(new)
            return
        # The common case, once per turn: one statement, its own transaction.
        with self._lock:
            conn = self._conn
            try:
                self._connection()
                conn.execute(_INSERT_TURN, values)
                if conn.in_transaction:  # a connection passed in may open one implicitly
                    conn.commit()
                self._commits += 1
            except sqlite3.Error as exc:
                _rollback(conn)
                raise StoreError(f"{self!r} cannot store turn {turn.index}: {exc}") from exc

    def _write_finish(
        self, header: dict[str, Any], final: dict[str, Any], turns: int, history: str, report: str
    ) -> None:
        dumped = {name: json.dumps(final[name], ensure_ascii=False) for name in _JSON_COLUMNS}
        with self._writing("finish a run") as conn:
            conn.execute(
                "INSERT INTO thena_runs (run_id, format, workflow, input, status, started_at, "
                "parent_run_id, forked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id) DO NOTHING",
                _header_values(header),
            )
            conn.execute(
                "UPDATE thena_runs SET status = ?, finished_at = ?, error = ?, usage = ?, "
                "stop_reasons = ?, output = ?, state = ?, pending = ?, history = ?, report = ?, "
                "replay_diverged_at = ? WHERE run_id = ?",
                (
                    final["status"],
                    final["finished_at"],
                    final["error"],
                    *(dumped[name] for name in _JSON_COLUMNS),
                    history,
                    report,
                    final["replay_diverged_at"],
                    header["run_id"],
                ),
            )
            conn.execute(_DELETE_FROM, (header["run_id"], turns))

    def _checkpoint(self) -> None:
        """Move the WAL into the database once enough turns were committed (writer thread)."""
        if self._commits < CHECKPOINT_EVERY:
            return
        with self._lock:
            self._commits = 0
            if not self._closed:
                with contextlib.suppress(sqlite3.Error):  # busy elsewhere: the next one will do
                    self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    # -- the connection -------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        """The connection, set up on first use (call with the lock held)."""
        if self._closed:
            raise StoreError(f"{self!r} is closed")
        conn = self._conn
        if not self._ready:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            # Checkpoints (the one step that syncs to disk) run on the writer thread after a
            # turn is acknowledged, not inside the commit of whichever turn crosses the limit.
            conn.execute("PRAGMA wal_autocheckpoint = 0")
            conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in _SCHEMA:
                    conn.execute(statement)
                have = {row[1] for row in conn.execute("PRAGMA table_info(thena_runs)")}
                for name, kind in _ADDED_COLUMNS:
                    if name not in have:
                        conn.execute(f"ALTER TABLE thena_runs ADD COLUMN {name} {kind}")
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
            self._ready = True
        return conn

    @contextlib.contextmanager
    def _writing(self, what: str) -> Iterator[sqlite3.Connection]:
        """One write transaction, taking the database's write lock at once."""
        with self._lock:
            try:
                conn = self._connection()
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"{self!r} cannot {what}: {exc}") from exc
            try:
                yield conn
                conn.commit()
            except sqlite3.Error as exc:
                _rollback(conn)
                raise StoreError(f"{self!r} cannot {what}: {exc}") from exc
            except BaseException:
                _rollback(conn)
                raise

    @contextlib.contextmanager
    def _reading(self, what: str) -> Iterator[sqlite3.Connection]:
        """One read transaction, so that a run's header and turns are from one moment."""
        with self._lock:
            try:
                conn = self._connection()
                conn.execute("BEGIN")
            except sqlite3.Error as exc:
                raise StoreError(f"{self!r} cannot {what}: {exc}") from exc
            try:
                yield conn
            except sqlite3.Error as exc:
                raise StoreError(f"{self!r} cannot {what}: {exc}") from exc
            finally:
                _rollback(conn)


class _Writer:
    """One thread that runs a store's writes in order, off the event loop.

    It does what `asyncio.to_thread` does, for about half the cost per call (no executor,
    no future chaining), which matters once per turn. A write whose awaiting task was
    cancelled still completes: the turn it stores is kept.
    """

    def __init__(self, after: Callable[[], None] | None = None) -> None:
        self._after = after
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._start = threading.Lock()

    async def run(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run `fn(*args)` on the writer thread and return what it returns (or raise)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[_T] = loop.create_future()
        if self._thread is None or self._pid != os.getpid():  # none yet, or a forked child
            with self._start:
                if self._thread is None or self._pid != os.getpid():
                    self._queue = queue.SimpleQueue()
                    self._thread = threading.Thread(
                        target=self._work,
                        args=(self._queue, self._after),
                        name="thena_nb-store",
                        daemon=True,
                    )
                    self._pid = os.getpid()
                    self._thread.start()
        self._queue.put((loop, done, fn, args))
        return await done

    def stop(self) -> None:
        """Finish the queued writes and end the thread."""
        with self._start:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()

    @staticmethod
    def _work(jobs: queue.SimpleQueue[Any], after: Callable[[], None] | None) -> None:
        while True:
            item = jobs.get()
            if item is None:
                return
            loop, done, fn, args = item
            try:
                outcome: tuple[bool, Any] = (True, fn(*args))
            except BaseException as exc:
                outcome = (False, exc)
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(_settle, done, *outcome)
            if after is not None:
                with contextlib.suppress(Exception):
                    after()


def _settle(done: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if done.cancelled():
        return
    if ok:
        done.set_result(value)
    else:
        done.set_exception(value)


_INSERT_TURN = (
    "INSERT OR REPLACE INTO thena_turns (run_id, idx, format, request_key, input_tokens, "
    "output_tokens, turn, state, messages) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_PART = "INSERT OR IGNORE INTO thena_request_parts (run_id, key, value) VALUES (?, ?, ?)"
_DELETE_FROM = "DELETE FROM thena_turns WHERE run_id = ? AND idx >= ?"
_RECENT_IDS = "SELECT run_id FROM thena_runs ORDER BY started_at DESC, rowid DESC LIMIT 5"


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


def _part_rows(run_id: str, parts: dict[str, Any], keys: list[str]) -> list[tuple[str, ...]]:
    return [(run_id, k, json.dumps(parts[k], ensure_ascii=False)) for k in keys]


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
