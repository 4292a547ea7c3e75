"""An MCP tool's huge result is cut like a native tool's (`max_tool_result_chars`), and a
timed-out MCP call names the limit that applied: the workflow's `tool_timeout` or the
server's `call_timeout`. Both against the hand-written stdio server of the tests."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from thena_nb import Agent, Workflow, loop, mcp, until_answered
from thena_nb.core.records.model import ModelRequest
from thena_nb.models import FunctionModel, ScriptedModel, reply

pytestmark = pytest.mark.anyio

LINES = str(Path(__file__).with_name("lines_server.py"))
BOUND_S = 30.0
FIVE_MB = 5_000_000


def lines(mode: str, tmp_path: Path, **limits: float) -> mcp.McpServer:
    return mcp.stdio(sys.executable, [LINES, mode, str(tmp_path / "pid")], **limits)


def one_loop(model: Any, server: mcp.McpServer, **options: Any) -> Workflow:
    agent = Agent("A", model=model, tools=[server])
    return Workflow("w", [loop(steps=[agent], until=until_answered, max_iterations=3)], **options)


async def test_a_5_mb_mcp_result_is_cut_before_it_is_kept_and_sent(tmp_path: Path) -> None:
    seen: list[ModelRequest] = []

    def answer(request: ModelRequest) -> Any:
        seen.append(request)
        return reply.tool("big", text=str(FIVE_MB)) if len(seen) == 1 else "done"

    wf = one_loop(FunctionModel(answer), lines("big", tmp_path), max_tool_result_chars=1000)
    run = await asyncio.wait_for(wf.arun("go", store=False), BOUND_S)
    (call,) = run.turns[0].tool_calls
    assert call.ok is True and call.result_cut == FIVE_MB - 1000
    assert call.result is not None
    assert call.result.startswith("HEAD" + "x" * 496 + "\n…[thena_nb cut 4,999,000 of 5,000,000")
    assert call.result.endswith("max_tool_result_chars=1000]…\n" + "x" * 496 + "TAIL")
    told = next(m for m in seen[1].messages if m.role == "tool")
    assert told.content == call.result


async def test_an_mcp_call_past_the_workflows_tool_timeout_names_that_limit(
    tmp_path: Path,
) -> None:
    server = lines("no-call", tmp_path)  # the server's own call_timeout: 600 s
    model = ScriptedModel([reply.tool("wait", text="x"), "gave up"])
    run = await asyncio.wait_for(
        one_loop(model, server, tool_timeout=0.5).arun("go", store=False), BOUND_S
    )
    error = run.turns[0].tool_calls[0].error or ""
    assert "timed out after 0.5 s and was cancelled" in error
    assert "The limit is the workflow's `Workflow(tool_timeout=0.5)`" in error
    assert "@tool" not in error and "call_timeout" not in error
    assert run.output == "gave up"


async def test_an_mcp_call_past_the_servers_call_timeout_names_that_limit(tmp_path: Path) -> None:
    server = lines("no-call", tmp_path, call_timeout=0.5)
    model = ScriptedModel([reply.tool("wait", text="x"), "gave up"])
    run = await asyncio.wait_for(
        one_loop(model, server, tool_timeout=20).arun("go", store=False), BOUND_S
    )
    error = run.turns[0].tool_calls[0].error or ""
    assert "did not answer tools/call 'wait' within 0.5 s" in error
    assert "The limit is the server's `mcp.stdio(..., call_timeout=0.5)`" in error
    assert "@tool" not in error and "tool_timeout" not in error
