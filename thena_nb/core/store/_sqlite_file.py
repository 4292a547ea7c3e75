"""Opening a run store's SQLite file: ours or refused, writable or read-only.

Our files carry `PRAGMA application_id = APPLICATION_ID`. A file with another id, or with
tables that are not ours, is refused before anything is written to it. A file that cannot
be written (a read-only file or directory) opens read-only: its runs can be listed and
loaded, and a write says why it cannot be made.

A turn's row is keyed by its run's number and its index (`turn_key`), the turn table's own
rowid, so that storing a turn writes one B-tree page. Files from before that layout keep
their turns in `OLD_TURNS`: the first writer that opens one moves them, in the transaction
that sets the file up.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from thena_nb.core.records.errors import StoreError

__all__ = [
    "APPLICATION_ID",
    "NEXT_NUMBER",
    "OLD_TURNS",
    "SCHEMA",
    "TURN_BITS",
    "next_number",
    "old_turns",
    "open_read_only",
    "prepare",
    "turn_key",
]

APPLICATION_ID = 0x54484E42
"""`PRAGMA application_id` of a thena_nb run store ("THNB")."""

BUSY_TIMEOUT_MS = 10_000

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS {db}thena_runs (
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
        pending TEXT,
        owner TEXT,
        lease_until REAL
    )""",
    # One row per turn, keyed by `turn_key(run_no, idx)` (`thena_runs.run_no`): the table's
    # own rowid, so a turn's commit writes one B-tree page, not a second one for an index.
    """CREATE TABLE IF NOT EXISTS {db}thena_turn_rows (
        turn_key INTEGER PRIMARY KEY,
        format INTEGER NOT NULL,
        request_key TEXT,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        turn TEXT NOT NULL,
        state TEXT,
        messages TEXT NOT NULL
    )""",
    # Newer than the first files: an older file gains them when it is opened.
    """CREATE TABLE IF NOT EXISTS {db}thena_request_parts (
        run_id TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (run_id, key)
    )""",
    # The numbers of deleted runs, never given again (their writers may still be going).
    """CREATE TABLE IF NOT EXISTS {db}thena_deleted_numbers (run_no INTEGER PRIMARY KEY)""",
    # A parallel block's branch turns, each stored as it finishes while the block is open
    # (the block's merge stores them again as run turns, at their final indexes).
    """CREATE TABLE IF NOT EXISTS {db}thena_branch_turns (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        format INTEGER NOT NULL,
        turn TEXT NOT NULL,
        state TEXT,
        messages TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    )""",
    # What an experiment's variant depended on when its runs were made (its fingerprint's
    # parts, and which of them are state), by variant; read to decide reuse.
    """CREATE TABLE IF NOT EXISTS {db}thena_fingerprints (
        key TEXT NOT NULL,
        digest TEXT NOT NULL,
        format INTEGER NOT NULL,
        record TEXT NOT NULL,
        written_at REAL NOT NULL,
        PRIMARY KEY (key, digest)
    )""",
)

ADDED_COLUMNS = (
    ("parent_run_id", "TEXT"),
    ("forked_at", "INTEGER"),
    ("pending", "TEXT"),
    ("owner", "TEXT"),
    ("lease_until", "REAL"),
    ("run_no", "INTEGER"),
)
"""Columns newer than the first files: added to an older file when it is opened."""

TURN_BITS = 32
"""A turn's key is `run_no << TURN_BITS | idx`: up to 2**32 turns a run, 2**31 runs a file.

A run's number (`thena_runs.run_no`) is given when it is first claimed: one more than any
number the file holds or held (`delete` keeps the numbers it frees in
`thena_deleted_numbers`), so a number is never given twice, even while a deleted run's
writer goes on."""
NEXT_NUMBER = (
    "max(coalesce((SELECT max(run_no) FROM thena_runs), 0), "
    "coalesce((SELECT max(run_no) FROM thena_deleted_numbers), 0)) + 1"
)
"""The number the next new run gets, as an SQL expression."""


def next_number(conn: sqlite3.Connection) -> int:
    """The number the next new run gets (`NEXT_NUMBER`)."""
    return int(conn.execute(f"SELECT {NEXT_NUMBER}").fetchone()[0])


OLD_TURNS = "thena_turns"
"""The turn table of files written before `thena_turn_rows` (keyed by run id and index, with
an index beside the table); its rows move to `thena_turn_rows` when such a file is opened
for writing. A file that cannot be written is read from it as it is (`old_turns`)."""

_READ_ONLY_HINTS = ("readonly", "read-only", "unable to open")


def prepare(conn: sqlite3.Connection, label: str) -> bool:
    """Check that `conn` holds a run store (or nothing yet) and set it up for writing;
    returns `False` when the file cannot be written (nothing was changed then).

    Raises:
        StoreError: The file is not SQLite, or is an SQLite file of something else.
    """
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    try:
        _check_ours(conn, label)
        _set_up(conn)
    except sqlite3.OperationalError as exc:
        if not any(hint in str(exc).lower() for hint in _READ_ONLY_HINTS):
            raise StoreError(f"cannot set up the run store {label}: {exc}") from exc
        if conn.in_transaction:
            conn.rollback()
        return False
    return True


def _check_ours(conn: sqlite3.Connection, label: str) -> None:
    try:
        app = conn.execute("PRAGMA application_id").fetchone()[0]
        tables = [
            name
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not name.startswith("sqlite_")
        ]
    except sqlite3.OperationalError:
        raise  # cannot be opened as it is (e.g. read-only): the caller decides
    except sqlite3.DatabaseError as exc:
        raise StoreError(
            f"{label} is not a thena_nb run store: it cannot be read as SQLite ({exc}). "
            "Give the path of a run store, or of a file that does not exist yet"
        ) from exc
    if app == APPLICATION_ID or (app == 0 and all(t.startswith("thena_") for t in tables)):
        return  # ours (or an older file of ours, or an empty one)
    what = f"application_id {app:#x}" if app else f"tables {', '.join(sorted(tables)[:5])}"
    raise StoreError(
        f"{label} is not a thena_nb run store: it is an SQLite file of something else "
        f"({what}), left as it is. Give the path of a run store, or of a file that does not "
        "exist yet"
    )


def _set_up(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN IMMEDIATE")  # a read-only file fails here, before anything changed
    try:
        create(conn)
        # Written every time: a file opened read-only fails here, not at its first turn.
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.commit()
    except BaseException:
        if conn.in_transaction:
            conn.rollback()
        raise
    _to_wal(conn)
    conn.execute("PRAGMA synchronous = NORMAL")
    # Checkpoints (the one step that syncs to disk) run on a thread of their own, after
    # enough turns were committed, never inside a turn's commit.
    conn.execute("PRAGMA wal_autocheckpoint = 0")


def _to_wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL. The switch answers with the old mode, without an error, while another
    connection holds the file (two processes opening a new file at once): try again."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while conn.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() != "wal":
        if time.monotonic() > deadline:
            raise sqlite3.OperationalError("the file stays locked: cannot switch it to WAL")
        time.sleep(0.01)


def turn_key(run_no: int, idx: int) -> int:
    """The key of turn `idx` of run number `run_no` in `thena_turn_rows`.

    Example:
        >>> turn_key(3, 5) == 3 * 2**32 + 5
        True
    """
    return run_no << TURN_BITS | idx


def create(conn: sqlite3.Connection) -> None:
    """Create the tables that are missing, and the columns newer than the first files, and
    move the turns of an older file into `thena_turn_rows` (in the caller's transaction)."""
    for statement in SCHEMA:
        conn.execute(statement.format(db=""))
    have = {row[1] for row in conn.execute("PRAGMA table_info(thena_runs)")}
    for name, kind in ADDED_COLUMNS:
        if name not in have:
            conn.execute(f"ALTER TABLE thena_runs ADD COLUMN {name} {kind}")
    conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS thena_runs_no ON thena_runs (run_no)")
    # Runs an older file (or an older writer) left without a number get one each.
    conn.execute(_NUMBER_THE_REST, (next_number(conn) - 1,))
    if _has_table(conn, OLD_TURNS):
        _move_old_turns(conn)


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    query = "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = ?"
    return conn.execute(query, (name,)).fetchone() is not None


_NUMBER_THE_REST = "UPDATE thena_runs SET run_no = ? + rowid WHERE run_no IS NULL"
"""Numbers above `?` (the highest given) for the runs that have none: their rowids are
distinct, so their numbers are."""


def _move_old_turns(conn: sqlite3.Connection) -> None:
    """An older file's turns, each under its run's number, into `thena_turn_rows`; then the
    old table goes (a file is moved once, by the first writer that opens it). Turns whose
    run has no row (a run deleted while it ran, in an older version) stay where they are."""
    conn.execute(
        "INSERT OR REPLACE INTO thena_turn_rows (turn_key, format, request_key, input_tokens, "
        f"output_tokens, turn, state, messages) SELECT (r.run_no << {TURN_BITS}) + t.idx, "
        "t.format, t.request_key, t.input_tokens, t.output_tokens, t.turn, t.state, t.messages "
        f"FROM {OLD_TURNS} t JOIN thena_runs r ON r.run_id = t.run_id"
    )
    conn.execute(f"DELETE FROM {OLD_TURNS} WHERE run_id IN (SELECT run_id FROM thena_runs)")
    if conn.execute(f"SELECT 1 FROM {OLD_TURNS} LIMIT 1").fetchone() is None:
        conn.execute(f"DROP TABLE {OLD_TURNS}")


def old_turns(conn: sqlite3.Connection) -> bool:
    """Whether a read-only file keeps its turns in the older table (`OLD_TURNS`), so that
    reading them takes the older queries."""
    return _has_table(conn, OLD_TURNS) and not _has_table(conn, "thena_turn_rows")


def _stand_ins(conn: sqlite3.Connection) -> None:
    """In a read-only file, what an older (or empty) file lacks, as temporary tables and a
    view (nothing is written to the file): the reading side then needs no special case."""
    tables = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for name, statement in zip(_TABLES, SCHEMA, strict=True):
        if name not in tables:
            conn.execute(statement.format(db="temp."))
    if "thena_runs" not in tables:
        return
    have = {row[1] for row in conn.execute("PRAGMA main.table_info(thena_runs)")}
    missing = [name for name, _ in ADDED_COLUMNS if name not in have]
    if missing:
        extra = ", ".join(f"NULL AS {name}" for name in missing)
        conn.execute(
            f"CREATE TEMP VIEW thena_runs AS SELECT rowid AS rowid, *, {extra} FROM main.thena_runs"
        )


def open_read_only(path: Path, label: str) -> sqlite3.Connection:
    """A read-only connection to `path`.

    A WAL file in a directory we cannot write to is opened as immutable (nobody can write
    to it either: a writer needs the directory for its journal).
    """
    where = str(path.resolve())
    for char, code in (("%", "%25"), ("?", "%3f"), ("#", "%23")):  # what a URI path escapes
        where = where.replace(char, code)
    uri = f"file:{where}"
    last: Exception | None = None
    for flags in ("mode=ro", "mode=ro&immutable=1"):
        conn = sqlite3.connect(f"{uri}?{flags}", uri=True, check_same_thread=False)
        conn.isolation_level = None
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            _check_ours(conn, label)
            _stand_ins(conn)
            return conn
        except sqlite3.OperationalError as exc:
            conn.close()
            last = exc
        except BaseException:
            conn.close()
            raise
    raise StoreError(f"cannot open the run store {label} even to read it: {last}")


_TABLES = (
    "thena_runs",
    "thena_turn_rows",
    "thena_request_parts",
    "thena_deleted_numbers",
    "thena_branch_turns",
    "thena_fingerprints",
)
