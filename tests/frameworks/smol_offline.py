"""What the smolagents tests share: reading the messages an offline `Model` is given, and
the native tool call it answers with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from smolagents import ChatMessage
from smolagents.models import MessageRole

QUIET = -1  # smolagents' `LogLevel.OFF`


def said(message: Any) -> str:
    """A smolagents message's text."""
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or ())


def call(call_id: str, name: str, **arguments: Any) -> ChatMessage:
    """The model's answer: one native tool call."""
    function = {"name": name, "arguments": arguments}
    return ChatMessage(
        role=MessageRole.ASSISTANT,
        content=None,
        tool_calls=[{"id": call_id, "type": "function", "function": function}],
    )


def observation(messages: list[Any]) -> str | None:
    """What the agent read back last: an observation or an error, else `None`."""
    last = said(messages[-1])
    if last.startswith("Observation:\n"):
        return last.removeprefix("Observation:\n")
    if "Error:\n" in last:
        return last.split("Error:\n", 1)[1].split("\nNow let's retry", 1)[0]
    return None


Answer = Callable[[list[Any]], ChatMessage]
