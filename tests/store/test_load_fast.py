"""Opening a stored run: `Run.load` gives back the run that was stored, records that behave
as the executor's own, the clear error for a corrupt row, and the garbage collector as it
found it (a load holds off its full collections while it decodes: `decoding`). Its speed
is measured in `benchmarks/run_load.py`, not here."""

from __future__ import annotations

import gc
import math
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.helpers import turn_rows_where
from thena_nb import Agent, Run, Workflow, loop, parallel, tool, until_answered
from thena_nb.core._collector import RUN_THRESHOLDS, fewer_collections
from thena_nb.core.records.errors import StoreError
from thena_nb.core.records.model import Reply
from thena_nb.core.records.types import Message, ToolCall, Turn, TurnInfo
from thena_nb.core.store.base import FULL_COLLECTIONS_HELD, decoding
from thena_nb.models import ScriptedModel, reply
from thena_nb.store import SqliteRunStore

BLOCK = {"type": "thinking", "thinking": "add first", "signature": "sig-1"}


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def fail(reason: str = "boom") -> str:
    """Always raises."""
    raise ValueError(reason)


def busy() -> Workflow:
    """A parallel block, then a loop with a native call, a failing tool, a rescued call and
    reasoning (text and provider blocks)."""
    left_model = ScriptedModel([reply.tool("add", a=1, b=2), "left done"], name="left")
    left = Agent("Left", model=left_model, tools=[add])
    right = Agent("Right", model=ScriptedModel(["right done"], name="right"))
    worker = Agent(
        "Worker",
        model=ScriptedModel(
            [
                Reply(
                    tool_calls=reply.tool("add", a=2, b=3).tool_calls,
                    finish_reason="tool_use",
                    reasoning="I should add them.",
                    reasoning_tokens=5,
                    reasoning_blocks=(BLOCK,),
                    input_tokens=11,
                    output_tokens=4,
                ),
                reply.tool("fail", reason="no luck"),
                'Adding: {"name": "add", "arguments": {"a": 4, "b": 5}}',
                reply.text("all done", input_tokens=3, output_tokens=1),
            ]
        ),
        tools=[add, fail],
    )
    return Workflow(
        "busy",
        [
            parallel([loop(steps=[left], until=until_answered), right]),
            loop(steps=[worker], until=until_answered, max_fails=math.inf),
        ],
    )


@pytest.fixture
def stored(tmp_path: Path) -> Iterator[tuple[Run, Path]]:
    path = tmp_path / "runs.sqlite3"
    with SqliteRunStore.from_path(path) as store:
        run = busy().run("go", run_id="busy-run", store=store)
    yield run, path


def test_a_loaded_run_equals_the_run_that_was_stored(stored: tuple[Run, Path]) -> None:
    run, path = stored
    calls = [c for t in run.turns for c in t.tool_calls]
    assert [c.source for c in calls] == ["native", "native", "native", "rescued"]
    assert [c.ok for c in calls] == [True, True, False, True]
    assert any(t.branch is not None for t in run.turns)
    assert [t.reasoning_blocks for t in run.turns].count((BLOCK,)) == 1
    with SqliteRunStore.from_path(path) as store:  # a fresh store: nothing cached
        loaded = Run.load(run.run_id, store=store)
    assert loaded is not run and len(loaded.turns) == len(run.turns) == 7
    assert loaded.turns == run.turns
    assert [t.model_dump() for t in loaded.turns] == [t.model_dump() for t in run.turns]
    assert [t.tool_calls for t in loaded.turns] == [t.tool_calls for t in run.turns]
    assert loaded.history == run.history
    reasoned = next(t for t in loaded.turns if t.reasoning)
    assert (reasoned.reasoning, reasoned.reasoning_tokens) == ("I should add them.", 5)
    assert reasoned.reasoning_blocks == (BLOCK,)
    assert any(m.reasoning_blocks == (BLOCK,) for m in loaded.history)
    for i in range(len(run.turns)):
        assert loaded.request_of(i) == run.request_of(i)
    assert loaded.report == run.report and loaded.report.model_dump() == run.report.model_dump()
    assert loaded.usage == run.usage and loaded.usage.input_tokens == 14
    assert loaded.stop_reasons == run.stop_reasons
    assert (loaded.status, loaded.output, loaded.states) == (run.status, run.output, run.states)


def test_a_loaded_run_equals_its_stored_turns_before_it_ended(stored: tuple[Run, Path]) -> None:
    """A run whose ending was never written (a killed process) is rebuilt from its turn
    rows, their messages included: the same turns, history and requests."""
    run, path = stored
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "UPDATE thena_runs SET status = 'running', finished_at = NULL, history = NULL, "
            "report = NULL, usage = NULL, owner = 'gone', lease_until = 0 WHERE run_id = ?",
            (run.run_id,),
        )
    conn.close()
    with SqliteRunStore.from_path(path) as store:
        loaded = store.load(run.run_id)
    assert loaded.status == "abandoned"
    assert loaded.turns == run.turns and loaded.history == run.history
    assert [loaded.request_of(i) for i in range(7)] == [run.request_of(i) for i in range(7)]
    assert loaded.usage == run.usage


def test_a_corrupt_turn_row_gives_the_clear_error(stored: tuple[Run, Path]) -> None:
    """As `tests/reliability/test_corrupt_rows.py` pins for every kind of row; and the
    collector is back on after the error."""
    run, path = stored
    conn = sqlite3.connect(path)
    with conn:
        where = turn_rows_where("run_id = 'busy-run' AND idx = 3")
        conn.execute(f"UPDATE thena_turn_rows SET turn = ? WHERE {where}", ('{"index": "x"}',))
    conn.close()
    assert gc.isenabled()
    corrupt = r"run 'busy-run' in .* is corrupt"
    with SqliteRunStore.from_path(path) as store, pytest.raises(StoreError, match=corrupt) as info:
        store.load(run.run_id)
    assert isinstance(info.value.__cause__, ValidationError)
    assert "store.delete('busy-run')" in str(info.value)
    assert gc.isenabled()


def test_a_load_leaves_the_collector_as_it_found_it(stored: tuple[Run, Path]) -> None:
    run, path = stored
    with SqliteRunStore.from_path(path) as store:
        store.load(run.run_id)
        assert gc.isenabled()
        gc.disable()
        try:
            store.load(run.run_id)
            assert not gc.isenabled()  # a program that turned it off keeps it off
        finally:
            gc.enable()


def test_a_load_holds_off_full_collections_and_puts_the_thresholds_back(
    stored: tuple[Run, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import thena_nb.core.store.sqlite as sqlite_store

    run, path = stored
    seen: list[tuple[int, int, int]] = []
    rebuild = sqlite_store.rebuild_run

    def watched(*args: object, **kwargs: object) -> Run:
        seen.append(gc.get_threshold())
        return rebuild(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite_store, "rebuild_run", watched)
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        with SqliteRunStore.from_path(path) as store:
            store.load(run.run_id)
        assert seen == [(700, 10, FULL_COLLECTIONS_HELD[2])]  # young collections go on
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*before)


@pytest.mark.parametrize("order", ["nested", "overlapping"])
def test_loads_and_runs_share_one_change_put_back_when_the_last_ends(order: str) -> None:
    """Loads on several threads, and a load during a run (a replay), overlap: whichever ends
    first, the thresholds are those of the blocks still open, then the ones found (blocks
    entered by hand: threads cannot be made to overlap reliably)."""
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        run, load = fewer_collections(), decoding()
        run.__enter__()
        load.__enter__()
        assert gc.get_threshold() == (RUN_THRESHOLDS[0], RUN_THRESHOLDS[1], 1 << 30)
        first, last = (load, run) if order == "nested" else (run, load)
        first.__exit__(None, None, None)
        expected = RUN_THRESHOLDS if last is run else (700, 10, FULL_COLLECTIONS_HELD[2])
        assert gc.get_threshold() == expected
        last.__exit__(None, None, None)
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*before)


def test_a_collector_turned_off_by_a_zero_threshold_stays_off() -> None:
    before = gc.get_threshold()
    gc.set_threshold(0, 10, 10)
    try:
        with decoding(), fewer_collections():
            assert gc.get_threshold()[0] == 0
        assert gc.get_threshold() == (0, 10, 10)
    finally:
        gc.set_threshold(*before)


def test_records_the_executor_builds_behave_like_validated_ones(
    stored: tuple[Run, Path],
) -> None:
    """The executor builds records without validation (`construct`); a load validates them.
    Each pair is equal, dumps the same, hashes the same and is frozen alike."""
    run, _ = stored
    for built in [*run.turns, *run.history]:
        validated = type(built).model_validate_json(built.model_dump_json())
        assert validated == built and built == validated
        assert validated.model_dump() == built.model_dump()
        assert validated.model_dump_json() == built.model_dump_json()
    turn = next(t for t in run.turns if t.reasoning_blocks)
    call = turn.tool_calls[0]
    again = Turn.model_validate_json(turn.model_dump_json())
    assert hash(again.info) == hash(turn.info) and isinstance(turn.info, TurnInfo)
    for record in (turn, call, turn.info, run.history[1]):
        assert isinstance(record, Turn | ToolCall | TurnInfo | Message)
        field = next(iter(type(record).model_fields))
        with pytest.raises(ValidationError, match="frozen"):
            setattr(record, field, getattr(record, field))
    for unhashable in (turn, call):  # a list or dict field: neither kind hashes
        with pytest.raises(TypeError):
            hash(unhashable)
        with pytest.raises(TypeError):
            hash(type(unhashable).model_validate_json(unhashable.model_dump_json()))
