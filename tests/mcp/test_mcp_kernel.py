"""MCP over stdio inside a real Jupyter kernel (ipykernel, started by jupyter_client): a cell
runs a workflow whose agent uses `mcp-server-time`; a paused session's server is closed when
the kernel shuts down. Under ipykernel `sys.stderr` has no file descriptor, which is what
breaks stdio servers that are handed it."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager
from mcp_processes import TIME_ARGS

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 240

SETUP = f"""
import sys
from thena_nb import Agent, Workflow, loop, mcp, until_answered
from thena_nb.models import ScriptedModel, reply
def clock_workflow():
    model = ScriptedModel([reply.tool("get_current_time", timezone="Europe/Paris"), "Noted."])
    agent = Agent("Clock", model=model, tools=[mcp.stdio(sys.executable, {TIME_ARGS!r})])
    return Workflow("clock", [loop(steps=[agent], until=until_answered)])
"""

RUN = """
run = clock_workflow().run("What time is it in Paris?", store=False)
call = run.turns[0].tool_calls[0]
print(run.status, call.ok, type(sys.stderr).__name__)
print(call.result)
"""

STUBBORN = """
import time
from mcp.server.mcpserver import MCPServer

server = MCPServer("stubborn")


@server.tool()
def ping() -> str:
    \"\"\"Answer pong.\"\"\"
    return "pong"


server.run()  # stdio, until its stdin closes
time.sleep(600)  # then it lingers: only a client that ends it makes it go
"""

PAUSE = """
import psutil
model = ScriptedModel([reply.tool("ping"), "pong"])
agent = Agent("Pinger", model=model, tools=[mcp.stdio(sys.executable, [{script!r}])])
session = Workflow("ping", [loop(steps=[agent], until=until_answered)]).session("go", store=False)
await session.step()
servers = [p.pid for p in psutil.Process().children(recursive=True)
           if {script!r} in p.cmdline()]
print(session.paused, servers)
"""


@pytest.fixture
def kernel() -> Iterator[tuple[KernelManager, BlockingKernelClient]]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "THENA_NB_STORE": "off"}
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(env=env, cwd=str(REPO))
    client = manager.blocking_client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=TIMEOUT_S)
        yield manager, client
    finally:
        client.stop_channels()
        if manager.is_alive():
            manager.shutdown_kernel(now=True)


def execute(client: BlockingKernelClient, code: str) -> tuple[str, str]:
    """Run one cell; its stdout and stderr, failing the test on an error."""
    out: dict[str, list[str]] = {"stdout": [], "stderr": []}
    errors: list[str] = []

    def hook(message: dict[str, Any]) -> None:
        kind, content = message["msg_type"], message["content"]
        if kind == "stream":
            out[content["name"]].append(content["text"])
        elif kind == "error":
            errors.append("\n".join(content["traceback"]))

    reply = client.execute_interactive(code, output_hook=hook, timeout=TIMEOUT_S)
    assert reply["content"]["status"] == "ok" and not errors, "\n".join(errors)
    return "".join(out["stdout"]), "".join(out["stderr"])


def test_a_kernel_cell_runs_an_agent_with_a_stdio_mcp_server(
    kernel: tuple[KernelManager, BlockingKernelClient],
) -> None:
    _, client = kernel
    execute(client, SETUP)
    stdout, stderr = execute(client, RUN)
    first, result = stdout.split("\n", 1)
    assert first == "finished True OutStream"  # the kernel's stderr, with no file descriptor
    assert '"timezone": "Europe/Paris"' in result
    assert "fileno" not in stderr and "UnsupportedOperation" not in stderr
    assert "Processing request" not in stderr  # the server's log went to its own file


def test_a_paused_sessions_server_is_closed_when_the_kernel_shuts_down(
    kernel: tuple[KernelManager, BlockingKernelClient], tmp_path: Path
) -> None:
    """The server outlives the end of its stdin, so only the close at exit can end it."""
    manager, client = kernel
    script = tmp_path / "stubborn_server.py"
    script.write_text(STUBBORN)
    execute(client, SETUP)
    stdout, _ = execute(client, PAUSE.format(script=str(script)))
    paused, pids = stdout.strip().split(" ", 1)
    servers = [psutil.Process(int(pid)) for pid in pids.strip("[]").split(",")]
    assert paused == "True" and len(servers) == 1 and servers[0].is_running()
    try:
        manager.shutdown_kernel(now=False)  # a shutdown request, as Jupyter sends it
        deadline = time.monotonic() + 60
        while _alive(servers[0]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(servers[0])
    finally:
        if _alive(servers[0]):
            servers[0].kill()


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
