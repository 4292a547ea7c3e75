"""Tool sources in `Agent(tools=[...])`: opened once per run when a live turn needs their
tools, kept for the run's turns, closed when the run ends; never opened by a replay that
the record serves."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
from helpers import add

from thena_nb import Agent, Workflow, loop, parallel, until_answered
from thena_nb.core.parts.tools import SchemaTool, Tool, ToolSource
from thena_nb.models import FunctionModel, ScriptedModel, reply

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


class Echoes:
    """A source whose one tool echoes its text; it counts what it was asked to do."""

    def __init__(self, name: str = "echo", key: str = "echoes-1") -> None:
        self.name = name
        self._key = key
        self.opened = 0
        self.closed = 0
        self.calls: list[dict[str, Any]] = []

    @property
    def key(self) -> str:
        return self._key

    @asynccontextmanager
    async def open(self) -> AsyncIterator[Sequence[Tool]]:
        self.opened += 1
        await asyncio.sleep(0)  # let concurrent openers meet here

        async def echo(arguments: dict[str, Any]) -> str:
            self.calls.append(arguments)
            return arguments["text"]

        try:
            yield [SchemaTool(echo, name=self.name, parameters=SCHEMA, description="Echo.")]
        finally:
            self.closed += 1

    def __repr__(self) -> str:
        return f"Echoes({self.name!r})"


def echo_loop(source: Echoes, replies: list[object]) -> tuple[Workflow, ScriptedModel]:
    model = ScriptedModel(replies)
    agent = Agent("A", model=model, tools=[add, source])
    return Workflow("w", [loop(steps=[agent], until=until_answered)]), model


def test_a_source_is_a_tool_source_and_agents_keep_it_apart_from_their_tools() -> None:
    source = Echoes()
    agent = Agent("A", model=ScriptedModel(["ok"]), tools=[add, source])
    assert isinstance(source, ToolSource)
    assert [t.name for t in agent.tools] == ["add"]
    assert agent.sources == [source]
    assert repr(agent) == "Agent('A', model='scripted', tools=['add'], sources=[Echoes('echo')])"
    assert agent.replace(system="x").sources == [source]


def test_the_agent_key_names_the_source_by_its_key_without_opening_it() -> None:
    plain = Agent("A", model=ScriptedModel(["ok"]), tools=[add])
    one = Agent("A", model=ScriptedModel(["ok"]), tools=[add, Echoes(key="k1")])
    same = Agent("A", model=ScriptedModel(["ok"]), tools=[add, Echoes(key="k1")])
    other = Agent("A", model=ScriptedModel(["ok"]), tools=[add, Echoes(key="k2")])
    assert one.key == same.key
    assert len({plain.key, one.key, other.key}) == 3


def test_the_source_opens_once_per_run_and_its_tools_follow_the_agents_own() -> None:
    source = Echoes()
    calls = [reply.tool("echo", text="one"), reply.tool("echo", text="two"), "done"]
    wf, model = echo_loop(source, calls)
    run = wf.run("go", store=False)
    assert run.status == "finished"
    assert (source.opened, source.closed) == (1, 1)
    assert [[s.name for s in r.tools] for r in model.requests] == [["add", "echo"]] * 3
    assert model.requests[0].tools[1].parameters == SCHEMA
    assert [c.result for t in run.turns for c in t.tool_calls] == ["one", "two"]
    wf.run("again", store=False)
    assert (source.opened, source.closed) == (2, 2)


def test_two_agents_and_parallel_branches_share_one_opening_per_run() -> None:
    source = Echoes()
    a = Agent("A", model=ScriptedModel([reply.tool("echo", text="a"), "a"]), tools=[source])
    b = Agent("B", model=ScriptedModel([reply.tool("echo", text="b"), "b"]), tools=[source])
    wf = Workflow("w", [parallel([a, b]), parallel([a, b])])
    run = wf.run("go", store=False)
    assert run.status == "finished"
    assert (source.opened, source.closed) == (1, 1)
    assert sorted(c["text"] for c in source.calls) == ["a", "b"]


def test_a_replay_served_from_the_record_never_opens_the_source() -> None:
    source = Echoes()
    wf, _ = echo_loop(source, [reply.tool("echo", text="one"), "done"])
    first = wf.run("go", store=False)
    again = wf.run("go", replay=first, store=False)
    assert again.replay_diverged_at is None
    assert [c.result for t in again.turns for c in t.tool_calls] == ["one"]
    assert (source.opened, len(source.calls)) == (1, 1)


def test_a_replay_opens_the_source_where_it_goes_live() -> None:
    source = Echoes()
    wf, _ = echo_loop(source, [reply.tool("echo", text="one"), "done"])
    first = wf.run("go", store=False)
    forked = first.fork(1, changes={"A": {"model": ScriptedModel(["live now"])}}, store=False)
    assert [t.replayed for t in forked.turns] == [True, False]
    assert forked.output == "live now"
    assert (source.opened, source.closed) == (2, 2)


def test_stopping_a_paused_session_closes_the_source() -> None:
    source = Echoes()
    wf, _ = echo_loop(source, [reply.tool("echo", text="one"), "done"])

    async def stop_after_one_turn() -> str:
        session = wf.session("go", store=False)
        await session.step()
        assert (source.opened, source.closed) == (1, 0)
        session.stop()
        await session.run()
        return session.result.status

    assert asyncio.run(stop_after_one_turn()) == "stopped"
    assert (source.opened, source.closed) == (1, 1)


def test_a_failing_run_still_closes_the_source() -> None:
    source = Echoes()

    def boom(request: object) -> object:
        if len(source.calls) == 1:
            raise RuntimeError("model down")
        return reply.tool("echo", text="one")

    agent = Agent("A", model=FunctionModel(boom), tools=[source])
    wf = Workflow("w", [loop(steps=[agent], until=until_answered)])
    with pytest.raises(RuntimeError, match="model down"):
        wf.run("go", store=False)
    assert (source.opened, source.closed) == (1, 1)


def test_a_source_tool_named_like_an_own_tool_is_a_clear_error() -> None:
    wf, _ = echo_loop(Echoes(name="add"), ["done"])
    with pytest.raises(ValueError, match=r"two tools named 'add' \(one from Echoes\('add'\)\)"):
        wf.run("go", store=False)


def test_a_source_that_fails_to_open_fails_the_run_with_its_error() -> None:
    class Broken(Echoes):
        @asynccontextmanager
        async def open(self) -> AsyncIterator[Sequence[Tool]]:
            raise ConnectionError("no server at the end of this")
            yield []

    wf, _ = echo_loop(Broken(), ["done"])
    with pytest.raises(ConnectionError, match="no server"):
        wf.run("go", store=False)


def test_schema_tool_validates_with_the_given_check_and_runs_the_async_function() -> None:
    seen: list[dict[str, Any]] = []

    def needs_text(arguments: dict[str, Any]) -> None:
        if "text" not in arguments:
            raise ValueError("text is required")

    async def echo(arguments: dict[str, Any]) -> dict[str, Any]:
        seen.append(arguments)
        return {"echo": arguments["text"]}

    t = SchemaTool(echo, name="echo", parameters=SCHEMA, validate=needs_text, gate=True)
    assert (t.spec.name, t.spec.parameters, t.gate, t.rescue) == ("echo", SCHEMA, True, True)
    assert asyncio.run(t.call(None, {"text": "hi"})) == '{"echo": "hi"}'
    with pytest.raises(ValueError, match="text is required"):
        asyncio.run(t.call(None, {}))
    assert seen == [{"text": "hi"}]
