"""An MCP tool as a `SchemaTool`, and a call's result as the text the model reads.

- The spec is the server's: name, description (or title) and `inputSchema` as listed.
- Arguments are checked against `inputSchema` with `jsonschema` (the SDK's own dependency)
  before anything is sent, so the model hears what is wrong without a round trip; the
  server checks them again. A schema `jsonschema` cannot read leaves the check to the server.
- The result: text blocks joined by newlines; structured content as JSON when there is no
  text; any other block named (`[image image/png]`, `[resource file:///a.txt]`, ...).
  `isError` raises `McpToolError` with the server's text, so the call fails.
- Names: the model APIs take 1 to 64 of `[a-zA-Z0-9_-]`, MCP more (`files.read`). A name
  they refuse is mapped to one they take (`files_read`, made unique with `_2`, `_3`, ...)
  and the description says the tool's own name; a call goes to the server by its own name.
  So one such tool never makes the server's other tools unusable.
- Gates and rescue follow the tool's annotations as the MCP spec reads them when a hint is
  absent: a tool is destructive unless `readOnlyHint` is true or `destructiveHint` is false.
  A destructive tool is gated (unless the server was made with `gate=False`) and is never
  run from a call rescued from the model's text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from mcp_types import (
    AudioContent,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    Tool,
)

from thena_nb._mcp._loop import on_mcp_loop
from thena_nb._mcp._transport import McpToolError
from thena_nb._schema import validator
from thena_nb.core.parts.tools import SchemaTool

if TYPE_CHECKING:
    from thena_nb._mcp._connection import Connection

__all__ = ["api_names", "as_tools", "is_destructive", "result_text"]

_ACCEPTED = re.compile(r"[a-zA-Z0-9_-]{1,64}")
"""The tool names the model APIs accept (`core/parts/tools.py` checks the same)."""
_REFUSED_CHARACTER = re.compile(r"[^a-zA-Z0-9_-]")


def as_tools(connection: Connection, listed: list[Tool], *, gate: bool) -> list[SchemaTool]:
    """The server's tools as the agent's, each call going to `connection` under the tool's
    own name (a name the model APIs refuse is mapped: see `api_names`)."""
    out = []
    for t, name in zip(listed, api_names([t.name for t in listed]), strict=True):
        destructive = is_destructive(t)
        description = t.description or t.title or ""
        if name != t.name:
            description = f"{description} (the MCP tool {t.name!r})".lstrip()
        out.append(
            SchemaTool(
                _caller(connection, t.name),
                name=name,
                parameters=t.input_schema,
                description=description,
                validate=validator(name, t.input_schema),
                rescue=not destructive,
                gate=gate and destructive,
            )
        )
    return out


def api_names(names: Sequence[str]) -> list[str]:
    """A name the model APIs accept for each of `names`, all different: an accepted name is
    kept; another has each refused character replaced by `_` and is cut to 64 characters,
    with `_2`, `_3`, ... added when that name is taken."""
    taken = {n for n in names if _ACCEPTED.fullmatch(n)}
    out = []
    for name in names:
        if _ACCEPTED.fullmatch(name):
            out.append(name)
            continue
        base = _REFUSED_CHARACTER.sub("_", name)[:64] or "tool"
        mapped, n = base, 1
        while mapped in taken:
            n += 1
            suffix = f"_{n}"
            mapped = base[: 64 - len(suffix)] + suffix
        taken.add(mapped)
        out.append(mapped)
    return out


def is_destructive(t: Tool) -> bool:
    """What the MCP spec assumes of a tool: destructive unless its hints say otherwise."""
    hints = t.annotations
    if hints is None:
        return True
    if hints.read_only_hint:
        return False
    return hints.destructive_hint is not False


def result_text(result: CallToolResult) -> str:
    """The text the model reads for a result (see the module's docstring)."""
    texts = [b.text for b in result.content if isinstance(b, TextContent)]
    others = [_named(b) for b in result.content if not isinstance(b, TextContent)]
    if not texts and result.structured_content is not None:
        texts = [json.dumps(result.structured_content, ensure_ascii=False, default=str)]
    return "\n".join([*texts, *others])


def _caller(connection: Connection, name: str) -> Callable[[dict[str, Any]], Awaitable[str]]:
    async def call(arguments: dict[str, Any]) -> str:
        result = await on_mcp_loop(connection.call(name, arguments))
        text = result_text(result)
        if result.is_error:
            raise McpToolError(text or f"tool {name!r} reported an error and said nothing more")
        return text

    return call


def _named(block: ContentBlock) -> str:
    if isinstance(block, ImageContent | AudioContent):
        return f"[{block.type} {block.mime_type}]"
    if isinstance(block, ResourceLink):
        return f"[resource link {block.uri}]"
    if isinstance(block, EmbeddedResource):
        return f"[resource {block.resource.uri}]"
    return f"[{getattr(block, 'type', type(block).__name__)}]"
