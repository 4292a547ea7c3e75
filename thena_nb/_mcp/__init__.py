"""MCP servers as tool sources, on the official `mcp` SDK; the face is `thena_nb.mcp`.

- `_server`: `McpServer` (the `ToolSource`), its two transports and its errors; no SDK import.
- `_connection`: one live connection, owned by one task on the MCP loop.
- `_convert`: an MCP tool as a `SchemaTool`, a call's result as text.
- `_loop`: the one event loop, in a thread of its own, where every connection lives.
"""
