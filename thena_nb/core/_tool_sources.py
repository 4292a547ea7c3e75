"""A run's tool sources: opened when an agent's first live model call needs their tools, kept
for the run's turns, closed when the run ends.

An agent with sources takes each live turn as a copy of itself that has the sources' tools
too (`for_turn`); the copy keeps the agent's key, which names the sources by configuration,
so the request keys of a replay are known without opening anything. Agents without sources
never reach this module.
"""

from __future__ import annotations

import asyncio
import warnings
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from thena_nb.core.agent import Agent
from thena_nb.core.tools import Tool, ToolSource

if TYPE_CHECKING:
    from thena_nb.core._run_state import RunControl
    from thena_nb.core.types import Turn

__all__ = ["RunTools", "close_tool_sources", "for_turn"]


class RunTools:
    """The tool sources one run has opened, and each agent's copy with their tools."""

    __slots__ = ("agents", "opened", "stack")

    def __init__(self) -> None:
        self.stack = AsyncExitStack()
        self.opened: dict[int, tuple[ToolSource, asyncio.Future[list[Tool]]]] = {}
        self.agents: dict[int, tuple[Agent, str, Agent]] = {}

    async def tools_of(self, source: ToolSource) -> list[Tool]:
        """The source's tools, opening it the first time any position of the run asks."""
        entry = self.opened.get(id(source))
        if entry is None:
            future: asyncio.Future[list[Tool]] = asyncio.get_running_loop().create_future()
            self.opened[id(source)] = (source, future)
            try:
                tools = list(await self.stack.enter_async_context(source.open()))
            except BaseException as exc:
                del self.opened[id(source)]
                future.set_exception(exc)
                future.exception()  # retrieved: whoever waits on it gets it raised
                raise
            future.set_result(tools)
            return tools
        return list(await asyncio.shield(entry[1]))

    async def agent_with_tools(self, agent: Agent) -> Agent:
        """`agent` with its sources' tools after its own, built once per run (again only if
        the agent was changed meanwhile)."""
        key = agent.key
        cached = self.agents.get(id(agent))
        if cached is not None and cached[0] is agent and cached[1] == key:
            return cached[2]
        tools: list[Tool] = list(agent.tools)
        for source in agent.sources:
            tools.extend(_checked(agent, source, tools, await self.tools_of(source)))
        resolved = agent.replace(tools=tools)
        object.__setattr__(resolved, "_key", key)  # the key names the sources, not their tools
        self.agents[id(agent)] = (agent, key, resolved)
        return resolved


async def for_turn(agent: Agent, control: RunControl, recorded: Turn | None) -> Agent:
    """The agent a turn runs with: with its sources' tools when the turn calls the model or
    runs tools; as it is when a replay serves both from the record."""
    replay = control.replay
    if recorded is not None and (replay is None or not replay.rerun_tools):
        return agent
    run_tools = control.tool_sources
    if run_tools is None:
        run_tools = control.tool_sources = RunTools()
    return await run_tools.agent_with_tools(agent)


async def close_tool_sources(control: RunControl) -> None:
    """Close every source the run opened, last opened first; a failure to close is a
    warning, never the run's outcome."""
    run_tools = control.tool_sources
    if run_tools is None:
        return
    control.tool_sources = None
    try:
        await run_tools.stack.aclose()
    except Exception as exc:
        warnings.warn(
            f"closing the run's tool sources failed: {type(exc).__name__}: {exc}",
            RuntimeWarning,
            stacklevel=1,
        )


def _checked(agent: Agent, source: ToolSource, have: list[Tool], new: list[Tool]) -> list[Tool]:
    names = {t.name for t in have}
    for t in new:
        if not isinstance(t, Tool):
            raise TypeError(f"tool source {source!r} gave {t!r}, which is not a `Tool`")
        if t.name in names:
            raise ValueError(
                f"agent {agent.name!r} has two tools named {t.name!r} (one from {source!r}); "
                "rename its own tool or give the agent only one of them"
            )
        names.add(t.name)
    return new
