"""`McpServer`: an MCP server as a tool source, and how it is reached (stdio or HTTP).

Nothing here imports the SDK: a workflow that names a server loads it only when a run opens
the server, so a replay served wholly from the record needs neither the server nor the SDK.
Naming a server does check that the SDK is installed (without importing it), so that a
missing `mcp` extra fails there, with what to install, not later inside a run.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from thena_nb.core.records.errors import ThenaError

if TYPE_CHECKING:
    from thena_nb.core.parts.tools import Tool

__all__ = ["HttpTransport", "McpServer", "McpServerError", "McpToolError", "StdioTransport"]

STARTUP_TIMEOUT_S = 60.0
"""How long a server has by default to start and list its tools."""
CALL_TIMEOUT_S = 600.0
"""How long a tool call waits by default for the server's answer."""
CLOSE_TIMEOUT_S = 10.0
"""How long closing waits for a server to wind down before cutting it off."""


class McpServerError(ThenaError):
    """An MCP server could not start, or stopped or failed while a run used it. The message
    names the server and ends with what it wrote to stderr, when it wrote anything."""


class McpToolError(ThenaError):
    """An MCP tool answered with `isError`: the call failed, and the model is told why."""


@dataclass(frozen=True)
class StdioTransport:
    """A server run as a subprocess, spoken to over its stdin and stdout."""

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = field(default=None, repr=False)
    cwd: str | None = None

    @property
    def label(self) -> str:
        """The command line, as errors name it."""
        return " ".join([self.command, *self.args])

    @property
    def short(self) -> str:
        return " ".join([Path(self.command).name, *self.args])

    def key_parts(self) -> tuple[object, ...]:
        return ("stdio", self.command, self.args)


@dataclass(frozen=True)
class HttpTransport:
    """A server reached over streamable HTTP."""

    url: str
    headers: Mapping[str, str] | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        """The URL without credentials or query (either may hold a secret)."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}{parts.path}"

    short = label

    def key_parts(self) -> tuple[object, ...]:
        return ("http", self.label)


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


def stdio_transport(
    command: str | os.PathLike[str],
    args: Sequence[str],
    env: Mapping[str, str] | None,
    cwd: str | os.PathLike[str] | None,
) -> StdioTransport:
    """Check a stdio server's settings, saying what to pass instead of a bad one."""
    command = os.fspath(command)
    if not command:
        raise ValueError("`mcp.stdio` needs the server's command, e.g. `mcp.stdio('uvx', ...)`")
    if isinstance(args, str) or not all(isinstance(a, str | os.PathLike) for a in args):
        raise TypeError(
            f"`mcp.stdio` args must be a list of strings, e.g. ['-m', 'mcp_server_time'], "
            f"got {args!r}"
        )
    if env is not None and not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise TypeError("`mcp.stdio` env must map names to strings")
    return StdioTransport(
        command,
        tuple(os.fspath(a) for a in args),
        dict(env) if env is not None else None,
        os.fspath(cwd) if cwd is not None else None,
    )


def http_transport(url: str, headers: Mapping[str, str] | None) -> HttpTransport:
    """Check an HTTP server's URL, saying what it should look like."""
    if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
        raise ValueError(
            f"`mcp.http` needs the server's http(s) URL, e.g. 'http://127.0.0.1:8000/mcp', "
            f"got {url!r}"
        )
    return HttpTransport(url, dict(headers) if headers is not None else None)
