"""A run's lifetime: freed by reference counting once dropped (no reference cycle), run on
a reused event loop by `wf.run`, and kept as `exc.run` when Ctrl-C interrupts a script."""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import textwrap
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.models import ScriptedModel, reply
from thena_nb.store import SqliteRunStore


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def tool_loop(n: int = 4) -> Workflow:
    replies: list[Any] = [reply.tool("add", a=i, b=1) for i in range(n - 1)] + ["done"]
    agent = Agent("Calc", model=ScriptedModel(replies), tools=[add])
    return Workflow("calc", [loop(steps=[agent], until=until_answered, max_iterations=n)])


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.usefixtures("no_collector")
def test_a_finished_run_is_freed_without_the_garbage_collector() -> None:
    wf = tool_loop()
    run = wf.run("go", store=False)
    assert run.status == "finished" and len(run.turns) == 4
    ref = weakref.ref(run)
    del run
    wf.run("again", store=False)  # `last_run()` now holds this one
    assert ref() is None, "the run sits in a reference cycle"


@pytest.mark.usefixtures("no_collector")
def test_a_stored_run_is_freed_without_the_garbage_collector(tmp_path: Path) -> None:
    store = SqliteRunStore(tmp_path / "runs.db")
    run = tool_loop().run("go", store=store)
    ref = weakref.ref(run)
    del run
    tool_loop().run("again", store=False)  # `last_run()` now holds this one
    assert ref() is None, "the stored run sits in a reference cycle"


@pytest.mark.usefixtures("no_collector")
def test_a_stepped_session_is_freed_once_it_ends() -> None:
    async def stepped() -> weakref.ref[Any]:
        session = tool_loop().session("go", store=False)
        while await session.step() is not None:
            pass
        assert session.done
        return weakref.ref(session.result)

    ref = asyncio.run(stepped())
    tool_loop().run("again", store=False)  # `last_run()` now holds this one
    assert ref() is None, "the session's run sits in a reference cycle"


def test_wf_run_reuses_one_event_loop_per_thread() -> None:
    seen: list[asyncio.AbstractEventLoop] = []

    def note_loop(ctx: Any) -> None:
        seen.append(asyncio.get_running_loop())

    wf = Workflow("loops", [note_loop])
    wf.run("one", store=False)
    wf.run("two", store=False)
    assert len(seen) == 2 and seen[0] is seen[1]
    assert not seen[0].is_closed()


def test_a_task_a_run_leaves_behind_is_cancelled_when_the_run_ends() -> None:
    left: list[asyncio.Task[None]] = []

    def spawn(ctx: Any) -> None:
        left.append(asyncio.get_running_loop().create_task(asyncio.sleep(3600)))

    Workflow("spawner", [spawn]).run("go", store=False)
    assert left[0].cancelled()


def test_ctrl_c_in_a_script_keeps_the_partial_run(tmp_path: Path) -> None:
    script = tmp_path / "interrupted.py"
    script.write_text(
        textwrap.dedent(
            """
            import os, signal
            from thena_nb import Agent, Workflow, loop, tool, until_answered
            from thena_nb.models import ScriptedModel, reply

            @tool
            def work(n: int) -> str:
                \"\"\"Do some work.\"\"\"
                if n == 2:
                    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the tool runs
                return f"done {n}"

            agent = Agent("A", model=ScriptedModel([reply.tool("work", n=i) for i in range(5)]),
                          tools=[work])
            wf = Workflow("w", [loop(steps=[agent], until=until_answered, max_iterations=5)])
            try:
                wf.run("go", store=False)
            except KeyboardInterrupt as exc:
                run = exc.run
                print("turns", len(run.turns), "last", run.turns[-1].tool_calls[0].result,
                      run.status, run.loops[0].stop_reason)
            else:
                print("not interrupted")
            """
        )
    )
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    # Interrupted in turn 3's tool: turns 1 and 2 are kept, and nothing more ran.
    assert out.stdout.split()[:5] == ["turns", "2", "last", "done", "1"], out.stdout + out.stderr
    assert out.stdout.split()[5:] == ["stopped", "stop"]
    assert "never retrieved" not in out.stderr
