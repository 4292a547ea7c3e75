"""Opening a stored run: `Run.load` gives back the run that was stored, records that behave
as the executor's own, the clear error for a corrupt row, and the garbage collector as it
found it (a load pauses it while it decodes: `paused_collector`). Its speed is measured in
`benchmarks/run_load.py`, not here."""

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
from thena_nb.core.records.errors import StoreError
from thena_nb.core.records.model import Reply
from thena_nb.core.records.types import Message, ToolCall, Turn, TurnInfo
from thena_nb.core.store.base import paused_collector
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


def test_overlapping_pauses_turn_the_collector_on_when_the_last_ends() -> None:
    """Loads on several threads overlap: the first to end must not turn it on under the
    other (a private helper, tested alone: threads cannot be made to overlap reliably)."""
    first, second = paused_collector(), paused_collector()
    first.__enter__()
    second.__enter__()
    assert not gc.isenabled()
    first.__exit__(None, None, None)
    assert not gc.isenabled()
    second.__exit__(None, None, None)
    assert gc.isenabled()


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
