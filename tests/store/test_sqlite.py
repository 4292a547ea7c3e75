"""What only the SQLite store does: its file, its format column, the default store."""

from __future__ import annotations

import sqlite3
import stat
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import TURNS_TABLE, turn_rows_where
from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.core.records.errors import StoreError
from thena_nb.core.records.types import Turn
from thena_nb.core.store import STORE_FORMAT
from thena_nb.core.store import default as store_module
from thena_nb.models import FunctionModel, ScriptedModel, reply
from thena_nb.store import SqliteRunStore, default_store, default_store_path

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def small() -> Workflow:
    model = ScriptedModel([reply.tool("add", a=1, b=2), "three"])
    return Workflow(
        "small", [loop(steps=[Agent("A", model=model, tools=[add])], until=until_answered)]
    )


@pytest.fixture
def fresh_defaults(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An empty cache of default stores, closed afterwards."""
    cache: dict[tuple[int, str], SqliteRunStore] = {}
    monkeypatch.setattr(store_module, "_defaults", cache)
    yield
    for s in cache.values():
        s.close()


@posix_only
def test_the_file_and_its_journal_are_readable_by_the_owner_alone(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    with SqliteRunStore.from_path(path) as store:
        small().run("go", store=store)
        files = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
        assert all(f.exists() for f in files)  # WAL mode: the journal files exist while open
        for f in files:
            assert stat.S_IMODE(f.stat().st_mode) == 0o600, f


def test_the_store_holds_no_api_key(tmp_path: Path) -> None:
    """A model object holding a key runs against the store; the key is nowhere in the files."""
    sentinel = f"sk-ant-sentinel-{uuid.uuid4().hex}"

    def respond(request: Any) -> Any:
        done = any(m.role == "tool" for m in request.messages)
        return "the total is 3" if done else reply.tool("add", a=1, b=2)

    model = FunctionModel(respond, name="keyed")
    model.api_key = sentinel  # type: ignore[attr-defined]
    wf = Workflow(
        "keyed", [loop(steps=[Agent("A", model=model, tools=[add])], until=until_answered)]
    )
    path = tmp_path / "runs.sqlite3"
    with SqliteRunStore.from_path(path) as store:
        run = wf.run("marker-input-7f3a", store=store)
        assert store.load(run.run_id).output == "the total is 3"
        open_files = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    closed_files = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    for blob in (open_files, closed_files):
        assert b"marker-input-7f3a" in blob  # the search does find what was stored
        assert sentinel.encode() not in blob


def test_rows_carry_a_format_version_and_newer_ones_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    with SqliteRunStore.from_path(path) as store:
        run = small().run("go", store=store)
        other = sqlite3.connect(path)
        formats = other.execute("SELECT DISTINCT format FROM thena_turn_rows").fetchall()
        assert formats == [(STORE_FORMAT,)]
        assert other.execute("SELECT format FROM thena_runs").fetchall() == [(STORE_FORMAT,)]
        with other:
            other.execute(
                f"UPDATE thena_turn_rows SET format = 99 WHERE {turn_rows_where('idx = 1')}"
            )
        other.close()
        with pytest.raises(StoreError, match="format 99, newer than this thena_nb reads"):
            store.load(run.run_id)


def test_wal_mode_and_json_rows(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    with SqliteRunStore.from_path(path) as store:
        run = small().run("go", store=store)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    turn, state, messages = conn.execute(
        f"SELECT turn, state, messages FROM {TURNS_TABLE} WHERE idx = 0"
    ).fetchone()
    conn.close()
    # Fields at their defaults are left out (about half the bytes); loading fills them in.
    assert turn == run.turns[0].model_dump_json(exclude_defaults=True)
    assert len(turn) < len(run.turns[0].model_dump_json()) * 3 / 4
    assert Turn.model_validate_json(turn) == run.turns[0]
    assert state is None
    assert '"role":"assistant"' in messages and '"role":"tool"' in messages
    assert '"tool_call_id":null' not in messages


def test_rows_written_with_every_field_still_load(tmp_path: Path) -> None:
    """Rows as earlier versions wrote them, every default spelled out, load the same."""
    path = tmp_path / "runs.sqlite3"
    with SqliteRunStore.from_path(path) as store:
        run = small().run("go", store=store)
        stored = store.load(run.run_id)
    conn = sqlite3.connect(path)
    with conn:
        for turn in run.turns:
            conn.execute(
                f"UPDATE thena_turn_rows SET turn = ? WHERE {turn_rows_where('run_id = ? AND idx = ?')}",
                (turn.model_dump_json(), run.run_id, turn.index),
            )
        history = "[" + ",".join(m.model_dump_json() for m in run.history) + "]"
        conn.execute(
            "UPDATE thena_runs SET history = ?, report = ? WHERE run_id = ?",
            (history, run.report.model_dump_json(), run.run_id),
        )
    conn.close()
    with SqliteRunStore.from_path(path) as store:
        again = store.load(run.run_id)
    assert again.turns == stored.turns == run.turns
    assert again.history == stored.history
    assert again.report == stored.report


def test_a_connection_can_be_passed_and_is_left_open(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "runs.sqlite3", check_same_thread=False)
    store = SqliteRunStore(conn)
    run = small().run("go", store=store)
    store.close()
    assert conn.execute("SELECT count(*) FROM thena_turn_rows").fetchone() == (2,)
    conn.close()
    assert repr(store) == "SqliteRunStore('connection')"
    with pytest.raises(StoreError, match="is closed"):
        store.load(run.run_id)


def test_a_store_that_cannot_be_opened_says_where(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="cannot open the run store"):
        SqliteRunStore(tmp_path / "missing-dir" / "runs.sqlite3")


def test_default_store_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fresh_defaults: None
) -> None:
    monkeypatch.setenv("THENA_NB_STORE", str(tmp_path / "mine.sqlite3"))
    first = default_store()
    assert isinstance(first, SqliteRunStore) and first.path == tmp_path / "mine.sqlite3"
    assert default_store() is first  # one store per file
    run = small().run("go")  # no store= given: the default store keeps it
    assert first.load(run.run_id).output == "three"
    assert small().run("go", store=False).run_id not in {r["run_id"] for r in first.list_runs()}
    for off in ("off", "OFF", "", "  "):
        monkeypatch.setenv("THENA_NB_STORE", off)
        assert default_store_path() is None and default_store() is None


def test_default_store_is_found_again_after_each_change_of_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fresh_defaults: None
) -> None:
    """The last lookup is remembered, but a new file name, `off`, a new working directory
    (for a relative name) or a closed store each give the right store again."""
    monkeypatch.setenv("THENA_NB_STORE", str(tmp_path / "a.sqlite3"))
    a = default_store()
    monkeypatch.setenv("THENA_NB_STORE", str(tmp_path / "b.sqlite3"))
    b = default_store()
    assert isinstance(a, SqliteRunStore) and isinstance(b, SqliteRunStore)
    assert b.path == tmp_path / "b.sqlite3"
    monkeypatch.setenv("THENA_NB_STORE", "off")
    assert default_store() is None
    monkeypatch.setenv("THENA_NB_STORE", str(tmp_path / "a.sqlite3"))
    assert default_store() is a
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    monkeypatch.setenv("THENA_NB_STORE", "runs.sqlite3")
    monkeypatch.chdir(tmp_path / "one")
    one = default_store()
    monkeypatch.chdir(tmp_path / "two")
    two = default_store()
    assert isinstance(one, SqliteRunStore) and isinstance(two, SqliteRunStore)
    assert (one.path, two.path) == (Path("runs.sqlite3"), Path("runs.sqlite3"))
    assert one is not two and (tmp_path / "two" / "runs.sqlite3").exists()
    store_module._defaults.clear()  # a fresh cache (as after the tests' reset) is honoured
    assert default_store() is not two
    for store in (a, b, one, two):
        store.close()


@posix_only
def test_default_store_lives_under_the_data_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fresh_defaults: None
) -> None:
    monkeypatch.delenv("THENA_NB_STORE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    store = default_store()
    expected = tmp_path / "data" / "thena_nb" / "runs.sqlite3"
    assert isinstance(store, SqliteRunStore) and store.path == expected
    assert stat.S_IMODE(expected.stat().st_mode) == 0o600
    assert stat.S_IMODE(expected.parent.stat().st_mode) == 0o700
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert (
        default_store_path() == tmp_path / "home" / ".local" / "share" / "thena_nb" / "runs.sqlite3"
    )


def test_an_unusable_default_store_warns_and_runs_go_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fresh_defaults: None
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("THENA_NB_STORE", str(blocker / "runs.sqlite3"))
    with pytest.warns(RuntimeWarning, match="runs are not being stored"):
        run = small().run("go")
    assert run.status == "finished"
