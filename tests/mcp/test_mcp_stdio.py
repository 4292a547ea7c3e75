"""MCP servers over stdio, as tool sources: `mcp-server-time` and `mcp-server-git` from the
dev extra, started by the runs that need them."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_processes import TIME_ARGS, server_processes

from thena_nb import Agent, Workflow, loop, mcp, until_answered
from thena_nb.core.parts.tools import SchemaTool, Tool
from thena_nb.core.records.model import ModelRequest
from thena_nb.models import FunctionModel, ScriptedModel, reply


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """A git repository with one commit and one changed file, for `mcp-server-git`."""
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("config", "user.email", "tests@example.invalid")
    git("config", "user.name", "Tests")
    (repo / "notes.txt").write_text("first\n")
    git("add", "notes.txt")
    git("commit", "-q", "-m", "First notes")
    (repo / "notes.txt").write_text("first\nsecond\n")
    return repo


def clock() -> mcp.McpServer:
    return mcp.stdio(sys.executable, TIME_ARGS)


def one_loop(agent: Agent) -> Workflow:
    return Workflow("w", [loop(steps=[agent], until=until_answered)])


async def listed(server: mcp.McpServer) -> dict[str, Tool]:
    async with server.open() as tools:
        return {t.name: t for t in tools}


def test_the_time_servers_tools_come_with_its_schemas_and_read_only_ones_are_not_gated() -> None:
    tools = asyncio.run(listed(clock()))
    assert set(tools) == {"get_current_time", "convert_time"}
    now = tools["get_current_time"]
    assert isinstance(now, SchemaTool)
    assert now.spec.description == "Get current time in a specific timezone"
    assert now.spec.parameters["required"] == ["timezone"]
    assert now.spec.parameters["properties"]["timezone"]["type"] == "string"
    assert (now.gate, now.rescue) == (False, True)  # readOnlyHint: true


def test_a_run_lists_the_tools_for_the_model_and_calls_one_through_the_server() -> None:
    model = ScriptedModel([reply.tool("get_current_time", timezone="Asia/Tokyo"), "Noted."])
    run = one_loop(Agent("Clock", model=model, tools=[clock()])).run("time?", store=False)
    assert run.status == "finished", run.error
    assert [[t.name for t in r.tools] for r in model.requests] == [
        ["get_current_time", "convert_time"]
    ] * 2
    call = run.turns[0].tool_calls[0]
    assert call.ok, call.error
    answer = json.loads(call.result or "")
    assert answer["timezone"] == "Asia/Tokyo"
    assert answer["datetime"].endswith("+09:00")
    assert server_processes("mcp_server_time") == []  # closed with the run


def test_is_error_is_a_failed_call_with_the_servers_words_and_bad_arguments_never_leave() -> None:
    model = ScriptedModel(
        [
            reply.tool("get_current_time", timezone="Mars/Olympus"),
            reply.tool("get_current_time", zone="UTC"),
            "Gave up.",
        ]
    )
    run = one_loop(Agent("Clock", model=model, tools=[clock()])).run("time?", store=False)
    unknown, invalid = (t.tool_calls[0] for t in run.turns[:2])
    assert unknown.ok is False
    assert "raised McpToolError" in (unknown.error or "")
    assert "Mars/Olympus" in (unknown.error or "")
    assert invalid.ok is False
    assert (invalid.error or "").startswith("Error: invalid arguments for tool 'get_current_time'")
    assert "- (arguments): 'timezone' is a required property" in (invalid.error or "")
    assert run.turns[0].info.tool_error and run.status == "finished"


def test_a_command_that_does_not_exist_is_a_clear_error_naming_it() -> None:
    missing = mcp.stdio("thena-nb-no-such-mcp-server", ["--flag"])
    agent = Agent("Clock", model=ScriptedModel(["never asked"]), tools=[missing])
    with pytest.raises(mcp.McpServerError) as caught:
        one_loop(agent).run("time?", store=False)
    message = str(caught.value)
    assert "MCP server 'thena-nb-no-such-mcp-server --flag' could not start" in message
    assert "no command 'thena-nb-no-such-mcp-server' was found" in message
    assert "sys.executable" in message  # how to run a Python server instead
    assert agent.model.requests == []  # type: ignore[attr-defined]


def test_a_server_that_exits_at_start_shows_what_it_wrote_to_stderr() -> None:
    code = "import sys; print('bad config: no token', file=sys.stderr); sys.exit(3)"
    crashing = mcp.stdio(sys.executable, ["-c", code])
    agent = Agent("A", model=ScriptedModel(["never asked"]), tools=[crashing])
    with pytest.raises(mcp.McpServerError) as caught:
        one_loop(agent).run("go", store=False)
    message = str(caught.value)
    assert "could not start: the connection closed (the server exited)" in message
    assert message.endswith("--- the server's stderr ---\nbad config: no token")
    assert caught.value.run.status == "failed"  # type: ignore[attr-defined]


def test_a_server_that_dies_mid_run_fails_the_call_it_was_in() -> None:
    def kill_then_call(request: ModelRequest) -> Any:
        turn = len([m for m in request.messages if m.role == "assistant"])
        if turn == 1:
            for process in server_processes("mcp_server_time"):
                process.kill()
                process.wait(10)
        return reply.tool("get_current_time", timezone="UTC") if turn < 2 else "Stopped."

    agent = Agent("Clock", model=FunctionModel(kill_then_call), tools=[clock()])
    run = one_loop(agent).run("time?", store=False)
    first, second = (t.tool_calls[0] for t in run.turns[:2])
    assert first.ok, first.error
    assert second.ok is False
    assert "raised McpServerError: MCP server" in (second.error or "")
    assert "mcp_server_time --local-timezone UTC' closed the connection during a call to " in (
        second.error or ""
    )
    assert run.status == "finished" and run.output == "Stopped."


def test_a_replay_whose_results_are_recorded_starts_no_server(tmp_path: Path) -> None:
    launcher = tmp_path / "time-server"
    launcher.write_text(f"#!/bin/sh\nexec {sys.executable} {' '.join(TIME_ARGS)}\n")
    launcher.chmod(0o755)
    server = mcp.stdio(launcher)
    model = ScriptedModel([reply.tool("get_current_time", timezone="UTC"), "Noted."])
    wf = one_loop(Agent("Clock", model=model, tools=[server]))
    first = wf.run("time?", store=False)
    assert first.turns[0].tool_calls[0].ok
    launcher.unlink()  # from here on, starting the server fails
    again = wf.run("time?", replay=first, store=False)
    assert again.replay_diverged_at is None
    assert again.turns[0].tool_calls[0].result == first.turns[0].tool_calls[0].result
    with pytest.raises(mcp.McpServerError, match="could not start"):
        wf.run("a new question", store=False)


def test_the_key_comes_from_the_command_line_and_env_values_are_never_shown() -> None:
    secret = {"TOKEN": "s3cr3t-value"}
    a = mcp.stdio("server", ["--x"], env=secret)
    b = mcp.stdio("server", ["--x"], env={"TOKEN": "rotated"})
    c = mcp.stdio("server", ["--y"])
    assert a.key == b.key != c.key
    assert "s3cr3t" not in repr(a) + repr(a.transport) + a.key
    with pytest.raises(TypeError, match=r"args must be a list of strings"):
        mcp.stdio("server", "--x")  # type: ignore[arg-type]


def test_env_and_cwd_reach_the_server(tmp_path: Path) -> None:
    code = (
        "import os, sys; print(os.environ['THENA_PROBE'], os.getcwd(), file=sys.stderr); "
        "sys.exit(1)"
    )
    probe = mcp.stdio(sys.executable, ["-c", code], env={"THENA_PROBE": "seen"}, cwd=tmp_path)
    with pytest.raises(mcp.McpServerError) as caught:
        asyncio.run(listed(probe))
    assert str(caught.value).endswith(f"seen {tmp_path}")


def test_the_git_servers_tools_are_gated_by_their_annotations(git_repo: Path) -> None:
    args = ["-m", "mcp_server_git", "--repository", str(git_repo)]
    tools = asyncio.run(listed(mcp.stdio(sys.executable, args)))
    gated = sorted(name for name, t in tools.items() if t.gate)
    assert gated == ["git_reset"]  # destructiveHint: true; the others are read-only or not
    assert tools["git_reset"].rescue is False and tools["git_commit"].rescue is True
    assert tools["git_status"].spec.parameters["required"] == ["repo_path"]
    ungated = asyncio.run(listed(mcp.stdio(sys.executable, args, gate=False)))
    assert not any(t.gate for t in ungated.values())


def test_an_agent_reads_a_git_repository_through_the_git_server(git_repo: Path) -> None:
    git = mcp.stdio(sys.executable, ["-m", "mcp_server_git", "--repository", str(git_repo)])
    model = ScriptedModel(
        [
            reply.tool("git_status", repo_path=str(git_repo)),
            reply.tool("git_log", repo_path=str(git_repo), max_count=1),
            reply.tool("git_diff_unstaged", repo_path=str(git_repo)),
            "One change, not staged.",
        ]
    )
    run = one_loop(Agent("Git", model=model, tools=[git])).run("what changed?", store=False)
    status, log, diff = (t.tool_calls[0] for t in run.turns[:3])
    assert status.ok and log.ok and diff.ok, [status.error, log.error, diff.error]
    assert "On branch main" in (status.result or "") and "notes.txt" in (status.result or "")
    assert "First notes" in (log.result or "")
    assert "+second" in (diff.result or "")


def test_a_script_runs_a_workflow_with_an_mcp_server(tmp_path: Path) -> None:
    script = tmp_path / "clock.py"
    script.write_text(
        "import sys\n"
        "from thena_nb import Agent, Workflow, loop, mcp, until_answered\n"
        "from thena_nb.models import ScriptedModel, reply\n"
        f"server = mcp.stdio(sys.executable, {TIME_ARGS!r})\n"
        "model = ScriptedModel([reply.tool('get_current_time', timezone='UTC'), 'ok'])\n"
        "agent = Agent('Clock', model=model, tools=[server])\n"
        "run = Workflow('w', [loop(steps=[agent], until=until_answered)]).run('t', store=False)\n"
        "print(run.status, run.turns[0].tool_calls[0].ok)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "finished True"
    assert "Processing request" not in done.stderr  # the server's log stays in its own file
