"""An MCP server of the tests: notes kept in memory, served over streamable HTTP on 127.0.0.1
by uvicorn in a thread. Its tools carry every kind of annotation the gates read."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import ToolAnnotations


@dataclass
class Seen:
    """What the server saw: request methods and the headers of each HTTP request."""

    methods: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)


def notes_server(seen: Seen) -> MCPServer:
    server = MCPServer("notes")
    notes: dict[str, str] = {"todo": "write tests"}

    async def record(ctx: Any, call_next: Any) -> Any:
        seen.methods.append(ctx.method)
        return await call_next(ctx)

    server.middleware.append(record)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def read_note(name: str) -> str:
        """Read one note."""
        if name not in notes:
            raise ToolError(f"no note named {name!r}")
        return notes[name]

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    def delete_note(name: str) -> str:
        """Delete one note."""
        notes.pop(name, None)
        return f"deleted {name}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    def add_note(name: str, text: str) -> str:
        """Add a note (adds only, never overwrites)."""
        notes.setdefault(name, text)
        return f"added {name}"

    @server.tool()
    def count_notes() -> dict[str, int]:
        """How many notes there are (no annotations: the spec's defaults apply)."""
        return {"count": len(notes)}

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def sketch() -> Image:
        """A picture of the notes."""
        return Image(data=b"\x89PNG\r\n\x1a\n", format="png")

    return server


@contextmanager
def serve_notes() -> Iterator[tuple[str, Seen]]:
    """Serve a fresh notes server; yields its URL and what it saw."""
    seen = Seen()
    app = notes_server(seen).streamable_http_app()

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await app(scope, receive, send)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(recording, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the notes server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/mcp", seen
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
