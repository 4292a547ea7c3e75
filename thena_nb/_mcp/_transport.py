"""How an MCP server is reached (stdio or HTTP), its time limits and its errors.

Below `_server.py` (the server as a tool source) and `_connection.py` (the server as one run
uses it), so that neither imports the other. Nothing here imports the SDK.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from thena_nb.core.records.errors import ThenaError

__all__ = [
    "CALL_TIMEOUT_S",
    "CLOSE_TIMEOUT_S",
    "STARTUP_TIMEOUT_S",
    "HttpTransport",
    "McpServerError",
    "McpToolError",
    "StdioTransport",
    "http_transport",
    "stdio_transport",
]

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
