"""One live connection to an MCP server, owned by one task on the MCP loop.

The owner task enters the transport and the `ClientSession` and leaves them in the same task,
as the SDK's task groups require; calls come from other tasks of the MCP loop. A stdio
server's stderr goes to a temporary file, never to `sys.stderr` (under Jupyter it has no
file descriptor), and its end is shown when the server fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Protocol, TextIO

import anyio
import httpx2
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    CallToolResult,
    PaginatedRequestParams,
    Tool,
)

from thena_nb._mcp import _loop
from thena_nb._mcp._transport import (
    CLOSE_TIMEOUT_S,
    HttpTransport,
    McpServerError,
    StdioTransport,
)

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams


__all__ = ["Connection"]

STDERR_TAIL_CHARS = 2000
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
"""The SDK's own defaults: a server may hold a response stream open for long."""


class Served(Protocol):
    """What a connection reads of its server (an `McpServer`): how to reach it and its limits."""

    @property
    def transport(self) -> StdioTransport | HttpTransport: ...
    @property
    def startup_timeout(self) -> float: ...
    @property
    def call_timeout(self) -> float: ...


class Connection:
    """A server as one run uses it: started by `start`, called by `call`, ended by `close`."""

    def __init__(self, server: Served) -> None:
        self.server = server
        self.label = server.transport.label
        self.session: ClientSession | None = None
        self.errlog: TextIO | None = None
        self._stop: asyncio.Event | None = None
        self._owner: asyncio.Task[None] | None = None
        self._scope: anyio.CancelScope | None = None
        self._ready: asyncio.Future[list[Tool]] | None = None

    async def start(self) -> list[Tool]:
        """Start the server and list its tools (on the MCP loop); raises `McpServerError`."""
        if isinstance(self.server.transport, StdioTransport):
            # Appended to by the server, read back from the start when it fails.
            self.errlog = tempfile.TemporaryFile(  # noqa: SIM115  # closed by `close`
                "a+", encoding="utf-8", errors="replace"
            )
        ready: asyncio.Future[list[Tool]] = asyncio.get_running_loop().create_future()
        self._ready = ready
        self._stop = asyncio.Event()
        self._owner = asyncio.create_task(self._own(ready), name=f"mcp {self.label}")
        _loop.live[id(self)] = self.close
        try:
            return await asyncio.wait_for(asyncio.shield(ready), self.server.startup_timeout)
        except BaseException as exc:
            # Our limit, not a timeout the transport raised (both are `TimeoutError`s).
            error = self._start_error(exc, limit_hit=not ready.done())
            # Shielded: a second cancel (Ctrl-C twice) must not leave the server running.
            await asyncio.shield(self.close())
            if error is None:
                raise
            raise error from _root(exc)

    async def call(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        """One `tools/call` (on the MCP loop); a server that is gone is an `McpServerError`."""
        session = self.session
        if session is None or self._owner is None or self._owner.done():
            raise self.failed(f"is not running, so tool {name!r} could not be called")
        limit = self.server.call_timeout
        try:
            return await session.call_tool(name, arguments, read_timeout_seconds=limit)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise self.failed(f"closed the connection during a call to {name!r}") from exc
            if exc.code == REQUEST_TIMEOUT:
                raise self.failed(
                    f"did not answer tools/call {name!r} within {limit:g} s. The limit is the "
                    f"server's `{self._maker()}(..., call_timeout={limit:g})`: raise it there "
                    f"for slower tools"
                ) from exc
            raise
        except (OSError, EOFError) as exc:
            raise self.failed(f"failed during a call to {name!r}: {_said(exc)}") from exc

    async def close(self) -> None:
        """Leave the session and the transport, which ends a stdio server's process.

        Every wait here is bounded: a server still starting (stuck in `initialize` or
        `tools/list`) is cut off at once; a started one has `CLOSE_TIMEOUT_S` to wind down,
        then it is cut off too. Cutting off cancels the owner's scope, whose exit (the SDK's
        transport) stops the server's process.
        """
        self.session = None
        if self._stop is not None:
            self._stop.set()
        owner = self._owner
        if owner is not None and not owner.done():
            ready = self._ready
            started = ready is not None and ready.done() and not ready.cancelled()
            if not started or not await _ended(owner, CLOSE_TIMEOUT_S):
                self._cut_off()
                await _ended(owner, CLOSE_TIMEOUT_S)
        _loop.live.pop(id(self), None)
        if self.errlog is not None:
            self.errlog.close()
            self.errlog = None

    def _cut_off(self) -> None:
        """Cancel the owner where it waits, through its anyio scope so that the transport's
        shielded shutdown still runs (a task not started yet is cancelled as a task)."""
        if self._scope is not None:
            self._scope.cancel()
        elif self._owner is not None:
            self._owner.cancel()

    def _maker(self) -> str:
        """The function that made the server: `mcp.stdio` or `mcp.http`."""
        return "mcp.stdio" if isinstance(self.server.transport, StdioTransport) else "mcp.http"

    def failed(self, what: str) -> McpServerError:
        """An error naming the server, what happened and the end of its stderr."""
        return McpServerError(f"MCP server {self.label!r} {what}{self._stderr_tail()}")

    async def _own(self, ready: asyncio.Future[list[Tool]]) -> None:
        assert self._stop is not None
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                async with AsyncExitStack() as stack:
                    read, write = await stack.enter_async_context(self._transport())
                    limit = self.server.call_timeout
                    session = await stack.enter_async_context(
                        ClientSession(read, write, read_timeout_seconds=limit)
                    )
                    await session.initialize()
                    tools = await _list_tools(session)
                    self.session = session
                    ready.set_result(tools)
                    await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            if not isinstance(exc, Exception | asyncio.CancelledError):
                raise
        finally:
            self._scope = None
            if not ready.done():
                ready.cancel()  # cut off before it started: `start` has given up already

    def _transport(self) -> contextlib.AbstractAsyncContextManager[TransportStreams]:
        t = self.server.transport
        if isinstance(t, StdioTransport):
            env = dict(t.env) if t.env is not None else None
            params = StdioServerParameters(command=t.command, args=list(t.args), env=env)
            if t.cwd is not None:
                params.cwd = t.cwd
            assert self.errlog is not None
            return stdio_client(params, errlog=self.errlog)
        return _http(t)

    def _start_error(self, exc: BaseException, *, limit_hit: bool) -> McpServerError | None:
        root = _root(exc)
        if isinstance(root, asyncio.CancelledError):
            return None  # the run was cancelled: nothing to explain
        if isinstance(exc, TimeoutError) and limit_hit:
            limit = self.server.startup_timeout
            return self.failed(
                f"did not start and list its tools within {limit:g} s (a server that needs "
                f"longer takes `startup_timeout=`)"
            )
        if isinstance(root, FileNotFoundError) and isinstance(
            self.server.transport, StdioTransport
        ):
            command = self.server.transport.command
            return self.failed(
                f"could not start: no command {command!r} was found. Install the server, or "
                "pass the full path to its command (a Python server runs as "
                "`mcp.stdio(sys.executable, ['-m', 'its_module'])`)"
            )
        return self.failed(f"could not start: {_said(root)}")

    def _stderr_tail(self) -> str:
        log = self.errlog
        if log is None or log.closed:
            return ""
        try:
            log.flush()
            log.seek(0)
            text = log.read().strip()
        except (OSError, ValueError):
            return ""
        if not text:
            return ""
        if len(text) > STDERR_TAIL_CHARS:
            text = "…" + text[-STDERR_TAIL_CHARS:]
        return f"\n--- the server's stderr ---\n{text}"


@contextlib.asynccontextmanager
async def _http(t: HttpTransport) -> Any:
    async with (
        httpx2.AsyncClient(headers=dict(t.headers or {}), timeout=HTTP_TIMEOUT) as client,
        streamable_http_client(t.url, http_client=client) as streams,
    ):
        yield streams


async def _list_tools(session: ClientSession) -> list[Tool]:
    tools: list[Tool] = []
    result = await session.list_tools()
    tools.extend(result.tools)
    while result.next_cursor is not None:
        result = await session.list_tools(params=PaginatedRequestParams(cursor=result.next_cursor))
        tools.extend(result.tools)
    return tools


async def _ended(task: asyncio.Task[None], limit: float) -> bool:
    """Wait up to `limit` seconds for `task` to end (without cancelling it): whether it did."""
    done, _ = await asyncio.wait([task], timeout=limit)
    return bool(done)


def _root(exc: BaseException) -> BaseException:
    """The exception under the SDK's task-group wrappers."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _said(exc: BaseException) -> str:
    if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
        return "the connection closed (the server exited)"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
