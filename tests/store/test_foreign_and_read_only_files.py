"""19 #21, #22: our SQLite files are marked (`application_id`), another program's file is
refused and never changed, and a store that cannot be written opens read-only."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from thena_nb import Agent, Workflow
from thena_nb.core.records.errors import StoreError
from thena_nb.core.store import default as store_module
from thena_nb.models import ScriptedModel
from thena_nb.store import APPLICATION_ID, SqliteRunStore, default_store

REPO = Path(__file__).resolve().parents[2]


def hello() -> Workflow:
    return Workflow("hello", [Agent("A", model=ScriptedModel(["Hi!"]))])


def _files(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in directory.iterdir()}


def test_a_new_store_file_carries_our_application_id(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    SqliteRunStore(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)
    conn.close()


def test_an_older_store_file_of_ours_is_opened_and_marked(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    with SqliteRunStore.from_path(path) as store:
        run = hello().run("hi", store=store)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 0")  # as files written before the mark were
    conn.commit()
    conn.close()
    with SqliteRunStore.from_path(path) as store:
        assert store.load(run.run_id).output == "Hi!"
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)
    conn.close()


@pytest.mark.parametrize("kind", ["tables", "application_id", "not sqlite"])
def test_a_foreign_file_is_refused_and_left_unchanged(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    if kind == "not sqlite":
        path.write_text("name,email\nada,ada@example.org\n")
    else:
        conn = sqlite3.connect(path)
        if kind == "tables":
            conn.execute("CREATE TABLE users (name TEXT, email TEXT)")
            conn.execute("INSERT INTO users VALUES ('ada', 'ada@example.org')")
        else:
            conn.execute("PRAGMA application_id = 1234")
        conn.commit()
        conn.close()
    before = _files(tmp_path)
    with pytest.raises(StoreError, match=r"app.db' is not a thena_nb run store") as info:
        SqliteRunStore(path)
    assert "a file that does not exist yet" in str(info.value)
    assert _files(tmp_path) == before  # no table, no journal mode, no -wal file
    if kind == "tables":
        assert "users" in str(info.value)


def test_a_foreign_connection_is_refused_too(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "app.db", check_same_thread=False)
    conn.execute("CREATE TABLE users (name TEXT)")
    conn.commit()
    with pytest.raises(StoreError, match="is not a thena_nb run store"):
        SqliteRunStore(conn)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    conn.close()


@pytest.fixture
def fresh_defaults(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    cache: dict[tuple[int, str], SqliteRunStore] = {}
    monkeypatch.setattr(store_module, "_defaults", cache)
    yield
    for s in cache.values():
        s.close()


def test_a_foreign_default_store_warns_and_runs_go_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fresh_defaults: None
) -> None:
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (name TEXT)")
    conn.commit()
    conn.close()
    before = _files(tmp_path)
    monkeypatch.setenv("THENA_NB_STORE", str(path))
    with pytest.warns(RuntimeWarning, match="is not a thena_nb run store"):
        assert default_store() is None
        assert hello().run("hi").status == "finished"
    assert _files(tmp_path) == before


READER = """
import sys
from thena_nb.store import SqliteRunStore, StoreError
from thena_nb import Agent, Workflow
from thena_nb.models import ScriptedModel
store = SqliteRunStore(sys.argv[1])
rows = store.list_runs()
run = store.load(rows[0]["run_id"])
print(store.read_only, [r["status"] for r in rows], run.output, len(run.turns))
wf = Workflow("hello", [Agent("A", model=ScriptedModel(["Hi!"]))])
try:
    wf.run("again", store=store)
except StoreError as exc:
    print("refused:", exc)
"""


def _as_reader(path: Path, target: Path) -> subprocess.CompletedProcess[str]:
    """Read the store in a process that cannot write `target` (the store's directory or
    its file). The modes say so; root writes whatever the modes say, so as root the
    process gets `target` mounted read-only in a mount namespace of its own."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-c", READER, str(path)]
    if os.geteuid() == 0:
        mount = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" "$0" && exec "$@"'
        command = ["unshare", "-m", "sh", "-c", mount, str(target), *command]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")
@pytest.mark.parametrize("what", ["directory", "file"])
def test_a_read_only_store_is_listed_and_loaded(what: str) -> None:
    top = Path(tempfile.mkdtemp(prefix="thena-ro-"))
    try:
        path = top / "runs.sqlite3"
        with SqliteRunStore.from_path(path) as store:
            hello().run("hi", store=store)
        for p in top.iterdir():
            p.chmod(0o444)
        top.chmod(0o555 if what == "directory" else 0o777)
        before = _files(top)
        done = _as_reader(path, top if what == "directory" else path)
        assert done.returncode == 0, done.stderr
        first, refused = done.stdout.splitlines()
        assert first == "True ['finished'] Hi! 1"
        assert "is read-only" in refused and "can be listed and loaded" in refused
        after = _files(top)
        if what == "file":  # a reader may make the journal files beside it; the store is as it was
            after = {path.name: after[path.name]}
            before = {path.name: before[path.name]}
        assert after == before
    finally:
        top.chmod(0o755)
        for p in top.iterdir():
            p.chmod(0o644)
            p.unlink()
        top.rmdir()
