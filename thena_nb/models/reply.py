"""Helpers that build the replies of offline models: `reply.text`, `reply.tool`, ...

Example:
    >>> from thena_nb.models import reply
    >>> reply.tool("add", a=1, b=2).tool_calls[0].arguments
    {'a': 1, 'b': 2}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from thena_nb.core.model import Reply
from thena_nb.core.types import ToolCall

__all__ = ["ErrorReply", "calls", "error", "text", "tool"]


class ErrorReply:
    """A scripted reply that raises `exc` from the model call instead of answering."""

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __repr__(self) -> str:
        return f"reply.error({self.exc!r})"


def text(
    content: str,
    *,
    finish_reason: str | None = None,
    input_tokens: int = 0,
    output_tokens: int = 0,
) -> Reply:
    """A text answer (which may hold a tool call written as text, for rescue to find)."""
    return Reply(
        text=content,
        finish_reason=finish_reason or "end_turn",
        input_tokens=input_tokens,
        output_tokens=output_tokens,
    )


def tool(
    name: str,
    arguments: Mapping[str, Any] | None = None,
    /,
    *,
    finish_reason: str | None = None,
    input_tokens: int = 0,
    output_tokens: int = 0,
    **kw_arguments: Any,
) -> Reply:
    """One native tool call; arguments as a dict or as keywords.

    For text beside the call, use `reply.calls([(name, arguments)], text=...)`.

    Example:
            >>> from thena_nb.models import reply
        >>> reply.tool("get_weather", {"city": "Lisbon"}).tool_calls[0].arguments
        {'city': 'Lisbon'}
    """
    args = dict(arguments or {})
    args.update(kw_arguments)
    return calls(
        [(name, args)],
        finish_reason=finish_reason,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
    )


def calls(
    tool_calls: Iterable[tuple[str, Mapping[str, Any]]],
    *,
    text: str = "",
    finish_reason: str | None = None,
    input_tokens: int = 0,
    output_tokens: int = 0,
) -> Reply:
    """Several native tool calls in one turn, in order."""
    # The id is left empty: offline models give each call an id that is the same in every
    # run (`call_<n>_<i>`), so replays and request keys line up.
    made = [
        ToolCall(id="", name=name, arguments=dict(args), source="native")
        for name, args in tool_calls
    ]
    return Reply(
        text=text,
        tool_calls=made,
        finish_reason=finish_reason or ("tool_use" if made else "end_turn"),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
    )


def error(exc: BaseException) -> ErrorReply:
    """This model call raises `exc` (e.g. `TransientModelError("overloaded")`)."""
    return ErrorReply(exc)
