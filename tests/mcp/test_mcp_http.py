"""An MCP server of the tests over streamable HTTP on 127.0.0.1, as a tool source: specs,
gates from annotations, results, errors, headers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from notes_server import Seen, serve_notes

from thena_nb import Agent, Decision, PendingCall, Workflow, loop, mcp, until_answered
from thena_nb.core.parts.tools import Tool
from thena_nb.models import ScriptedModel, reply


@pytest.fixture
def notes() -> Iterator[tuple[str, Seen]]:
    with serve_notes() as served:
        yield served


async def listed(server: mcp.McpServer) -> dict[str, Tool]:
    async with server.open() as tools:
        return {t.name: t for t in tools}


def test_destructive_and_unannotated_tools_are_gated_read_only_ones_are_not(
    notes: tuple[str, Seen],
) -> None:
    url, _ = notes
    tools = asyncio.run(listed(mcp.http(url)))
    gates = {name: t.gate for name, t in tools.items()}
    assert gates == {
        "read_note": False,  # readOnlyHint: true
        "delete_note": True,  # destructiveHint: true
        "add_note": False,  # destructiveHint: false
        "count_notes": True,  # no annotations: destructive, as the spec's defaults say
        "sketch": False,
    }
    assert {n for n, t in tools.items() if not t.rescue} == {"delete_note", "count_notes"}
    assert tools["add_note"].spec.parameters["required"] == ["name", "text"]
    assert tools["add_note"].spec.description == "Add a note (adds only, never overwrites)."
    ungated = asyncio.run(listed(mcp.http(url, gate=False)))
    assert not any(t.gate for t in ungated.values())


def test_a_run_lists_once_and_calls_through_the_server(notes: tuple[str, Seen]) -> None:
    url, seen = notes
    model = ScriptedModel(
        [
            reply.tool("add_note", name="milk", text="buy milk"),
            reply.tool("read_note", name="milk"),
            reply.tool("count_notes"),
            reply.tool("sketch"),
            reply.tool("read_note", name="eggs"),
            "Done.",
        ]
    )
    agent = Agent("Notes", model=model, tools=[mcp.http(url)])
    wf = Workflow("w", [loop(steps=[agent], until=until_answered)])
    asked: list[str] = []

    def approve(pending: PendingCall) -> Decision:
        asked.append(pending.call.name)
        return Decision.approve()

    run = wf.run("go", store=False, approve=approve)
    assert run.status == "finished", run.error
    # Destructive (or unannotated) tools were held for a decision; read-only ones were not.
    assert asked == ["count_notes"]
    added, read, count, sketch, missing = (t.tool_calls[0] for t in run.turns[:5])
    assert [c.decision for c in (added, read, count, sketch)] == [None, None, "approve", None]
    assert (added.result, read.result) == ("added milk", "buy milk")
    assert json.loads(count.result or "") == {"count": 2}
    assert sketch.result == "[image image/png]"  # other content is named
    assert missing.ok is False and "no note named 'eggs'" in (missing.error or "")
    assert seen.methods.count("tools/list") == 1  # listed once for the run's six turns
    assert seen.methods.count("tools/call") == 5


def test_a_destructive_tool_waits_for_a_decision_before_the_server_is_called(
    notes: tuple[str, Seen],
) -> None:
    url, seen = notes
    model = ScriptedModel([reply.tool("delete_note", name="milk"), "Done."])
    agent = Agent("Notes", model=model, tools=[mcp.http(url)])
    run = Workflow("w", [loop(steps=[agent], until=until_answered)]).run("go", store=False)
    assert run.status == "waiting"
    assert [p.call.name for p in run.pending] == ["delete_note"]
    assert seen.methods.count("tools/call") == 0


def test_headers_reach_the_server_and_never_the_repr_or_the_key(notes: tuple[str, Seen]) -> None:
    url, seen = notes
    server = mcp.http(url, headers={"Authorization": "Bearer s3cr3t"})
    asyncio.run(listed(server))
    assert seen.headers and all(h.get("authorization") == "Bearer s3cr3t" for h in seen.headers)
    assert "s3cr3t" not in repr(server) + server.key
    assert server.key == mcp.http(url, headers={"Authorization": "Bearer other"}).key


def test_a_url_with_nothing_listening_is_a_clear_error_naming_it() -> None:
    with serve_notes() as (url, _):
        pass  # the port is free again
    agent = Agent("Notes", model=ScriptedModel(["never asked"]), tools=[mcp.http(url)])
    with pytest.raises(mcp.McpServerError, match=f"MCP server '{url}' could not start"):
        Workflow("w", [agent]).run("go", store=False)


def test_a_url_that_is_not_http_is_refused_with_an_example() -> None:
    with pytest.raises(ValueError, match=r"http\(s\) URL, e.g. 'http://127.0.0.1:8000/mcp'"):
        mcp.http("127.0.0.1:8000")
