"""Every MCP wait has a limit, and no server outlives its session: servers that never
answer `initialize`, `tools/list` or `tools/call` (stdio and HTTP), and a run cancelled
(Ctrl-C) while a server starts. Each test bounds its own wait with `asyncio.wait_for`, so a
hang fails it instead of stalling the suite."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from thena_nb import Agent, Workflow, loop, mcp, until_answered
from thena_nb.models import ScriptedModel, reply

pytestmark = pytest.mark.anyio

LINES = str(Path(__file__).with_name("lines_server.py"))
BOUND_S = 30.0
"""A test's own bound: far above the limits under test, far below a hang."""


def lines_server(
    mode: str, pid_file: Path, *, startup_timeout: float = 60.0, call_timeout: float = 600.0
) -> mcp.McpServer:
    args = [LINES, mode, str(pid_file)]
    return mcp.stdio(
        sys.executable, args, startup_timeout=startup_timeout, call_timeout=call_timeout
    )


def one_loop(model: ScriptedModel, server: mcp.McpServer) -> Workflow:
    agent = Agent("A", model=model, tools=[server])
    return Workflow("w", [loop(steps=[agent], until=until_answered, max_iterations=3)])


def gone(pid_file: Path) -> bool:
    """Whether the server whose pid is in `pid_file` has exited (waits for it, bounded)."""
    pid = int(pid_file.read_text())
    try:
        psutil.Process(pid).wait(timeout=BOUND_S)
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        return False
    return True


@pytest.mark.parametrize("mode", ["mute", "no-list"])
async def test_a_stdio_server_that_never_answers_fails_the_run_within_its_startup_limit(
    mode: str, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    server = lines_server(mode, pid_file, startup_timeout=0.5)
    wf = one_loop(ScriptedModel(["never asked"]), server)
    with pytest.raises(mcp.McpServerError) as caught:
        await asyncio.wait_for(wf.arun("go", store=False), BOUND_S)
    assert "did not start and list its tools within 0.5 s" in str(caught.value)
    assert gone(pid_file)


async def test_a_run_cancelled_while_a_server_starts_leaves_no_server_behind(
    tmp_path: Path,
) -> None:
    """Ctrl-C cancels the run's task: the server's start-up is cancelled with it."""
    pid_file = tmp_path / "pid"
    wf = one_loop(ScriptedModel(["never asked"]), lines_server("mute", pid_file))
    task = asyncio.ensure_future(wf.arun("go", store=False))
    for _ in range(int(BOUND_S / 0.05)):  # the server has read `initialize`
        if pid_file.exists() and pid_file.read_text():
            break
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gone(pid_file)


async def test_a_tool_call_the_server_never_answers_fails_at_its_limit_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "pid"
    server = lines_server("no-call", pid_file, call_timeout=0.5)
    model = ScriptedModel([reply.tool("wait", text="x"), "gave up"])
    run = await asyncio.wait_for(one_loop(model, server).arun("go", store=False), BOUND_S)
    assert run.status == "finished" and run.output == "gave up"
    call = run.turns[0].tool_calls[0]
    assert call.ok is False
    assert "did not answer tools/call 'wait' within 0.5 s" in (call.error or "")
    assert gone(pid_file)


class Silent:
    """The never-answering endpoint: its URL and the connections it accepted."""

    def __init__(self, url: str, held: list[socket.socket]) -> None:
        self.url = url
        self.held = held

    def all_closed_by_the_client(self) -> bool:
        """Whether every accepted connection reached its end (the client let it go)."""
        for conn in self.held:
            conn.settimeout(BOUND_S)
            try:
                while conn.recv(65536):
                    pass  # the request, unanswered; then the end
            except TimeoutError:
                return False
        return bool(self.held)


@pytest.fixture
def silent_http() -> Iterator[Silent]:
    """An HTTP endpoint on 127.0.0.1 that accepts connections, reads, and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)  # kept open, never answered

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield Silent(f"http://127.0.0.1:{listener.getsockname()[1]}/mcp", held)
    stop.set()
    listener.shutdown(socket.SHUT_RDWR)  # wakes the `accept` under way
    listener.close()
    for conn in held:
        conn.close()
    thread.join(BOUND_S)


async def test_an_http_server_that_never_answers_fails_the_run_within_its_startup_limit(
    silent_http: Silent,
) -> None:
    server = mcp.http(silent_http.url, startup_timeout=0.5)
    wf = one_loop(ScriptedModel(["never asked"]), server)
    with pytest.raises(mcp.McpServerError) as caught:
        await asyncio.wait_for(wf.arun("go", store=False), BOUND_S)
    assert "did not start and list its tools within 0.5 s" in str(caught.value)
    assert await asyncio.to_thread(silent_http.all_closed_by_the_client)


def test_limits_must_be_positive_numbers() -> None:
    with pytest.raises(ValueError, match="startup_timeout"):
        mcp.stdio("server", startup_timeout=0)
    with pytest.raises(ValueError, match="call_timeout"):
        mcp.http("http://127.0.0.1:1/mcp", call_timeout=-1)
