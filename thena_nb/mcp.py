"""MCP servers as tool sources: their tools beside your `@tool`s in `Agent(tools=[...])`.

```python
import sys
from thena_nb import Agent, mcp
time_server = mcp.stdio(sys.executable, ["-m", "mcp_server_time"])
agent = Agent("Clock", model=model, tools=[time_server])
```

A run connects to each server its agents name when the first live model call needs the
tools (a replay whose results are all recorded connects to none), lists the tools once and
keeps them for its turns, and disconnects when it ends or its session is stopped, or when a
session dropped unfinished (paused, never stopped) is collected; servers still open when the
interpreter exits (a kernel shutting down) are closed then. A stdio
server's stderr is kept in a temporary file, never handed the kernel's `sys.stderr`, and
shown when the server fails. Needs the `mcp` extra: `pip install "thena_nb[mcp]"`; without
it `mcp.stdio(...)` and `mcp.http(...)` raise `ImportError` saying so, before any run.

Each MCP tool is a `SchemaTool` whose spec is the server's `inputSchema`; arguments are
checked against it with `jsonschema` before the call; an `isError` result fails the call
(`McpToolError`); a server that cannot start, or dies, raises or fails the call with an
`McpServerError` naming the command and showing its stderr. Every wait has a limit: a
server that does not start and list its tools within `startup_timeout` fails the run, a
call not answered within `call_timeout` fails the call, and a server that will not wind
down is cut off, so no server outlives its run (also after Ctrl-C). A tool the spec calls
destructive (`destructiveHint` true or absent, `readOnlyHint` not true) is gated
(`Tool.gate`) unless the server was made with `gate=False`, and is never run from a call
rescued from text.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from thena_nb._mcp._server import McpServer
from thena_nb._mcp._transport import (
    CALL_TIMEOUT_S,
    STARTUP_TIMEOUT_S,
    McpServerError,
    McpToolError,
    http_transport,
    stdio_transport,
)

__all__ = ["McpServer", "McpServerError", "McpToolError", "http", "stdio"]


def stdio(
    command: str | os.PathLike[str],
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    gate: bool = True,
    startup_timeout: float = STARTUP_TIMEOUT_S,
    call_timeout: float = CALL_TIMEOUT_S,
) -> McpServer:
    """An MCP server run as a subprocess and spoken to over stdio, as a tool source.

    Args:
        command: The server's executable (`"uvx"`, `"npx"`, `sys.executable`, a path).
        args: Its arguments, e.g. `["-m", "mcp_server_time"]`.
        env: Environment variables for the server, added to the few the SDK passes on
            (`HOME`, `PATH`, ...). Their values never reach a repr, a key or an error.
        cwd: The server's working directory.
        gate: `False` to gate none of its tools; by default the destructive ones are gated.
        startup_timeout: Seconds the server has to start and list its tools; past it the
            run fails with an `McpServerError` and the server is stopped.
        call_timeout: Seconds a tool call waits for the server's answer; past it the call
            fails (the model is told) and the run goes on.

    Raises:
        ImportError: The MCP SDK is not installed (`pip install 'thena_nb[mcp]'`).

    Example:
        >>> from thena_nb import Agent, mcp
        >>> from thena_nb.models import ScriptedModel
        >>> clock = mcp.stdio("mcp-server-time", ["--local-timezone", "Europe/Paris"])
        >>> Agent("Clock", model=ScriptedModel(["noon"]), tools=[clock]).sources
        [McpServer(stdio 'mcp-server-time --local-timezone Europe/Paris')]
    """
    return McpServer(
        stdio_transport(command, args, env, cwd),
        gate=gate,
        startup_timeout=startup_timeout,
        call_timeout=call_timeout,
    )


def http(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    gate: bool = True,
    startup_timeout: float = STARTUP_TIMEOUT_S,
    call_timeout: float = CALL_TIMEOUT_S,
) -> McpServer:
    """An MCP server reached over streamable HTTP, as a tool source.

    Args:
        url: The server's endpoint, e.g. `"http://127.0.0.1:8000/mcp"`.
        headers: HTTP headers for every request (an `Authorization` token); never shown.
        gate: `False` to gate none of its tools; by default the destructive ones are gated.
        startup_timeout: Seconds the server has to answer `initialize` and list its tools.
        call_timeout: Seconds a tool call waits for the server's answer.

    Raises:
        ImportError: The MCP SDK is not installed (`pip install 'thena_nb[mcp]'`).

    Example:
        >>> from thena_nb import mcp
        >>> mcp.http("http://127.0.0.1:8000/mcp", headers={"Authorization": "Bearer s3cr3t"})
        McpServer(http 'http://127.0.0.1:8000/mcp')
    """
    return McpServer(
        http_transport(url, headers),
        gate=gate,
        startup_timeout=startup_timeout,
        call_timeout=call_timeout,
    )
