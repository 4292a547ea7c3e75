"""19 #8: a 10 MB tool result is stored once (in its call), not again in the turn's messages
and the run's history, and every copy reads back as it was."""

from __future__ import annotations

from pathlib import Path

from thena_nb import Agent, Run, Workflow, loop, tool, until_answered
from thena_nb.core.store._once import LONG_CHARS, MARK
from thena_nb.models import ScriptedModel, reply
from thena_nb.store import SqliteRunStore

BIG = 10_000_000


@tool
def dump(n: int) -> str:
    """Return a very long text."""
    return "x" * n


@tool
def fails(n: int) -> str:
    """Raise with a very long message."""
    raise ValueError("y" * n)


def _workflow(tool_name: str, n: int) -> Workflow:
    model = ScriptedModel([reply.tool(tool_name, n=n), "done"])
    agent = Agent("A", model=model, tools=[dump, fails])
    steps = [loop(steps=[agent], until=until_answered, max_iterations=3)]
    return Workflow("big", steps, max_tool_result_chars=None)  # the store keeps it whole


def _file_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def test_a_ten_megabyte_tool_result_is_stored_once(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with SqliteRunStore(path) as store:
        run = _workflow("dump", BIG).run("go", store=store)
        assert run.turns[0].tool_calls[0].result == "x" * BIG
        loaded = store.load(run.run_id)
    assert _file_bytes(path) < 1.5 * BIG  # once, not three times over
    assert loaded.history == run.history
    assert loaded.turns[0].tool_calls[0].result == "x" * BIG
    assert not any(m.content.startswith(MARK) for m in loaded.history)


def test_a_long_error_is_stored_once_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with SqliteRunStore(path) as store:
        run = _workflow("fails", 2 * LONG_CHARS).run("go", store=store)
        assert run.turns[0].tool_calls[0].ok is False
        assert store.load(run.run_id).history == run.history


def test_an_unfinished_run_rebuilt_from_its_turns_gets_its_long_results_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.db"
    with SqliteRunStore(path) as store:
        run = _workflow("dump", 3 * LONG_CHARS).run("go", store=store)
        stored = store.load(run.run_id)
        # As a killed run is read: from its turns' messages, with no ending written.
        with store._writing("forget the ending") as conn:
            conn.execute(
                "UPDATE thena_runs SET finished_at = NULL, history = NULL, status = 'running' "
                "WHERE run_id = ?",
                (run.run_id,),
            )
        again = store.load(run.run_id)
    assert [m.content for m in again.history] == [m.content for m in stored.history]
    assert again.history[2].content == "x" * (3 * LONG_CHARS)


def test_a_tool_message_that_only_looks_like_a_reference_reads_back_as_written(
    tmp_path: Path,
) -> None:
    text = MARK + "0:call_1_0"  # short, and shaped like a reference
    model = ScriptedModel([reply.tool("echo", text=text), "done"])

    @tool
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    wf = Workflow(
        "echo", [loop(steps=[Agent("A", model=model, tools=[echo])], until=until_answered)]
    )
    with SqliteRunStore(tmp_path / "runs.db") as store:
        run = wf.run("go", store=store)
        loaded: Run = store.load(run.run_id)
    assert loaded.history == run.history
