"""A run's tool sources: opened when an agent's first live model call needs their tools, kept
for the run's turns, closed when the run ends.

An agent with sources takes each live turn as a copy of itself that has the sources' tools
too (`for_turn`); the copy keeps the agent's key, which names the sources by configuration,
so the request keys of a replay are known without opening anything. Agents without sources
never reach this module.

A session dropped unfinished (paused, never stopped) still closes what its run opened: when
the session is collected (`closed_with`), not only when the interpreter exits.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import warnings
import weakref
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from thena_nb.core.parts.agent import Agent
from thena_nb.core.parts.tools import Tool, ToolSource

if TYPE_CHECKING:
    from thena_nb.core.engine._run_state import RunControl
    from thena_nb.core.records.types import Turn

__all__ = ["RunTools", "close_tool_sources", "closed_with", "for_turn"]


class RunTools:
    """The tool sources one run has opened, and each agent's copy with their tools."""

    __slots__ = ("agents", "opened", "stack")

    def __init__(self) -> None:
        self.stack: AsyncExitStack | None = None
        """Made when the run opens its first source: most runs open none."""
        self.opened: dict[int, tuple[ToolSource, asyncio.Future[list[Tool]]]] = {}
        self.agents: dict[int, tuple[Agent, str, Agent]] = {}

    async def aclose(self) -> None:
        """Close every source opened, last opened first."""
        stack, self.stack = self.stack, None
        if stack is not None:
            await stack.aclose()
        self.opened.clear()

    async def tools_of(self, source: ToolSource) -> list[Tool]:
        """The source's tools, opening it the first time any position of the run asks."""
        entry = self.opened.get(id(source))
        if entry is None:
            future: asyncio.Future[list[Tool]] = asyncio.get_running_loop().create_future()
            self.opened[id(source)] = (source, future)
            _start_closer()  # (here, not in the finalizer: a collection may come at any time)
            if self.stack is None:
                self.stack = AsyncExitStack()
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
        await run_tools.aclose()
    except Exception as exc:
        warnings.warn(
            f"closing the run's tool sources failed: {type(exc).__name__}: {exc}",
            RuntimeWarning,
            stacklevel=1,
        )


def closed_with(session: object) -> RunTools:
    """A run's `RunTools`, whose open sources are closed when `session` is collected.

    A session dropped while its run is paused (never stopped, never finished) leaves its
    task pending forever; the sources it opened (an MCP server's process) are closed when
    the session is collected: the finalizer hands them to the closer thread, which leaves
    them on an event loop of its own (the run's loop may be gone, and a collection may
    happen inside it). At interpreter exit the MCP layer closes what is left
    (`_mcp/_loop.py`), so the finalizer does not run then.
    """
    run_tools = RunTools()
    weakref.finalize(session, _close_abandoned, run_tools).atexit = False
    return run_tools


_abandoned: queue.SimpleQueue[AsyncExitStack] = queue.SimpleQueue()
"""The sources of collected sessions, for the closer thread (`SimpleQueue.put` may be called
from a finalizer)."""
_closer: threading.Thread | None = None
_closer_lock = threading.Lock()


def _start_closer() -> None:
    """Start the closer thread, once a run has opened a source (the finalizer starts none)."""
    global _closer
    with _closer_lock:
        if _closer is None or not _closer.is_alive():
            _closer = threading.Thread(target=_close_dropped, name="thena_nb-close", daemon=True)
            _closer.start()


def _close_abandoned(run_tools: RunTools) -> None:
    """Hand the sources of a run whose session was collected to the closer thread (called
    by the collector: it takes no lock and starts no thread)."""
    stack, run_tools.stack = run_tools.stack, None
    if stack is None or not run_tools.opened:
        return
    run_tools.opened.clear()
    run_tools.agents.clear()
    _abandoned.put(stack)


def _close_dropped() -> None:
    """The closer thread: leave each dropped session's sources, one after another."""
    while True:
        asyncio.run(_quietly_closed(_abandoned.get()))


async def _quietly_closed(stack: AsyncExitStack) -> None:
    """Leave the sources; a failure is a warning (nobody else is left to hear of it), and
    the closer thread goes on to the next."""
    try:
        await stack.aclose()
    except (Exception, asyncio.CancelledError) as exc:
        warnings.warn(
            f"closing a dropped session's tool sources failed: {type(exc).__name__}: {exc}",
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
