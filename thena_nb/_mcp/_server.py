"""`McpServer`: an MCP server as a tool source, and how it is reached (stdio or HTTP).

Nothing here imports the SDK: a workflow that names a server loads it only when a run opens
the server, so a replay served wholly from the record needs neither the server nor the SDK.
Naming a server does check that the SDK is installed (without importing it), so that a
missing `mcp` extra fails there, with what to install, not later inside a run.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from thena_nb._mcp._transport import (
    CALL_TIMEOUT_S,
    STARTUP_TIMEOUT_S,
    HttpTransport,
    McpServerError,
    McpToolError,
    StdioTransport,
)

if TYPE_CHECKING:
    from thena_nb.core.parts.tools import Tool

__all__ = ["HttpTransport", "McpServer", "McpServerError", "McpToolError", "StdioTransport"]


class McpServer:
    """An MCP server's tools, for `Agent(tools=[...])`; make one with `thena_nb.mcp.stdio`
    or `thena_nb.mcp.http`.

    Each run that needs its tools connects once (starting the subprocess, for stdio), lists
    the tools, keeps them for its turns and disconnects when it ends. `key` comes from the
    command and arguments, or the URL, never from the server's answers or from `env` or
    `headers`.
    """

    def __init__(
        self,
        transport: StdioTransport | HttpTransport,
        *,
        gate: bool = True,
        startup_timeout: float = STARTUP_TIMEOUT_S,
        call_timeout: float = CALL_TIMEOUT_S,
    ) -> None:
        _require_sdk(transport)
        self.transport = transport
        self.gate = gate
        self.startup_timeout = _limit("startup_timeout", startup_timeout)
        """Seconds the server has to start and list its tools."""
        self.call_timeout = _limit("call_timeout", call_timeout)
        """Seconds a tool call waits for the server's answer."""
        parts = repr(transport.key_parts()).encode()
        self._key = hashlib.blake2b(b"mcp " + parts, digest_size=16).hexdigest()

    @property
    def key(self) -> str:
        """A fingerprint of what the server is: its command line, or its URL."""
        return self._key

    @asynccontextmanager
    async def open(self) -> AsyncIterator[Sequence[Tool]]:
        """Connect, list the tools, yield them as `SchemaTool`s; disconnect on leaving."""
        from thena_nb._mcp._connection import Connection
        from thena_nb._mcp._convert import as_tools
        from thena_nb._mcp._loop import on_mcp_loop

        connection = Connection(self)
        listed = await on_mcp_loop(connection.start())
        try:
            yield as_tools(connection, listed, gate=self.gate)
        finally:
            await on_mcp_loop(connection.close())

    def __repr__(self) -> str:
        kind = "stdio" if isinstance(self.transport, StdioTransport) else "http"
        return f"McpServer({kind} {self.transport.short!r})"


def _require_sdk(transport: StdioTransport | HttpTransport) -> None:
    """Raise `ImportError` naming the extra to install when the MCP SDK is missing."""
    if importlib.util.find_spec("mcp") is None:  # (looked for, not imported)
        maker = "mcp.stdio" if isinstance(transport, StdioTransport) else "mcp.http"
        raise ImportError(
            f"`{maker}(...)` needs the MCP SDK; install it with `pip install 'thena_nb[mcp]'` "
            "(the `lab` extra has it too)",
            name="mcp",
        )


def _limit(name: str, seconds: float) -> float:
    """A time limit, checked: a positive number of seconds."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise ValueError(f"`{name}` must be a positive number of seconds, got {seconds!r}")
    return float(seconds)
