"""A session dropped while paused, never stopped, closes its MCP servers when it is collected,
not only when the interpreter exits: its run is recorded as interrupted, and nothing is
reported about its pending task or its tool sources."""

from __future__ import annotations

import asyncio
import gc
import sys
import time
import weakref

import psutil
import pytest
from mcp_processes import TIME_ARGS, server_processes

from thena_nb import Agent, Workflow, loop, mcp, until_answered
from thena_nb.core.runs.run import INTERRUPTED
from thena_nb.core.store.memory import MemoryRunStore
from thena_nb.models import ScriptedModel, reply

pytestmark = pytest.mark.anyio

DEADLINE_S = 60.0
"""How long the server may take to go once its session is collected: a bound, not a speed."""


@pytest.fixture(autouse=True)
def _earlier_garbage_collected() -> None:
    """Collect what earlier tests of this worker left (an HTTP client whose event loop is
    closed) before this test's loop starts: the test's own `gc.collect()` must find only its
    session, or a finalizer of theirs fails inside this test's loop."""
    gc.collect()


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def test_a_session_dropped_while_paused_closes_its_server_when_collected(
    caplog: pytest.LogCaptureFixture,
) -> None:
    before = {p.pid for p in server_processes("mcp_server_time")}
    model = ScriptedModel([reply.tool("get_current_time", timezone="UTC"), "Noted."])
    agent = Agent("Clock", model=model, tools=[mcp.stdio(sys.executable, TIME_ARGS)])
    store = MemoryRunStore()
    session = Workflow("w", [loop(steps=[agent], until=until_answered)]).session(
        "time?", store=store
    )
    assert await session.step() is not None and session.paused
    [server] = [p for p in server_processes("mcp_server_time") if p.pid not in before]
    run_id = session.result.run_id
    dropped = weakref.ref(session)
    del session
    gc.collect()
    assert dropped() is None
    deadline = time.monotonic() + DEADLINE_S
    while _alive(server) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not _alive(server)
    stored = store.load(run_id)
    assert (stored.status, stored.error, len(stored.turns)) == ("stopped", INTERRUPTED, 1)
    assert "destroyed but it is pending" not in caplog.text
