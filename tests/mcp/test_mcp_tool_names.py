"""MCP tool names the model APIs refuse (a dot is legal in MCP; the APIs take 1 to 64 of
`[a-zA-Z0-9_-]`) are mapped to names they accept, and back for the call; one such tool
never makes the server's other tools unusable."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from thena_nb import Agent, Workflow, loop, mcp, until_answered
from thena_nb.core.parts.tools import Tool
from thena_nb.models import ScriptedModel, reply

LINES = str(Path(__file__).with_name("lines_server.py"))
BOUND_S = 30.0


def server(tmp_path: Path) -> mcp.McpServer:
    return mcp.stdio(sys.executable, [LINES, "dotted", str(tmp_path / "pid")])


async def listed(s: mcp.McpServer) -> list[Tool]:
    async with s.open() as tools:
        return list(tools)


def test_refused_names_are_mapped_to_accepted_unique_ones(tmp_path: Path) -> None:
    tools = asyncio.run(asyncio.wait_for(listed(server(tmp_path)), BOUND_S))
    assert [t.name for t in tools] == ["files_read_2", "files_read", "echo", "a" * 64, "sp_ace"]
    assert tools[0].description.endswith("(the MCP tool 'files.read')")
    assert tools[2].description == ""  # an accepted name is kept as it is, and said nothing of


def test_a_mapped_name_calls_the_server_by_its_own_name_and_the_others_work(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [
            reply.calls([("files_read_2", {"text": "a"}), ("echo", {"text": "b"}), ("sp_ace", {})]),
            "done",
        ]
    )
    agent = Agent("A", model=model, tools=[server(tmp_path)])
    wf = Workflow("w", [loop(steps=[agent], until=until_answered, max_iterations=3)])
    run = asyncio.run(asyncio.wait_for(wf.arun("go", store=False), BOUND_S))
    assert run.status == "finished", run.error
    assert [c.result for c in run.turns[0].tool_calls] == [
        'files.read got {"text": "a"}',
        'echo got {"text": "b"}',
        "sp ace got {}",
    ]
    assert "files_read_2" in [t.name for t in model.requests[0].tools]


@pytest.mark.parametrize(
    ("names", "mapped"),
    [
        (["a.b", "a_b", "a_b_2"], ["a_b_3", "a_b", "a_b_2"]),
        (["", "ü"], ["tool", "_"]),
        (["x" * 63 + ".", "x" * 70, "x" * 64], ["x" * 63 + "_", "x" * 62 + "_2", "x" * 64]),
    ],
)
def test_the_mapping_is_unique_and_accepted(names: list[str], mapped: list[str]) -> None:
    from thena_nb._mcp._convert import api_names

    assert api_names(names) == mapped
