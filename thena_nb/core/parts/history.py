"""History processors: what part of the history an agent sends to its model."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from thena_nb.core.records.types import Message

__all__ = ["HistoryProcessor", "keep_first_and_recent"]

HistoryProcessor = Callable[[Sequence[Message]], Sequence[Message]]
"""Takes the history an agent would send and returns what it sends instead."""


def keep_first_and_recent(n: int) -> HistoryProcessor:
    """Keep the first message and the last `n`, never separating a tool result from its call.

    Where the last `n` would start with tool results, it reaches further back to the
    assistant message that made those calls.

    Example:
        >>> from thena_nb import Agent, keep_first_and_recent
        >>> from thena_nb.models import ScriptedModel
        >>> agent = Agent("Executor", model=ScriptedModel(["ok"]), history=keep_first_and_recent(6))
    """
    if n < 1:
        raise ValueError(f"`keep_first_and_recent(n)` needs n >= 1, got {n!r}")

    def process(messages: Sequence[Message]) -> Sequence[Message]:
        total = len(messages)
        if total <= n + 1:
            return messages
        start = total - n
        while start > 1 and messages[start].role == "tool":
            start -= 1
        return [messages[0], *messages[start:]]

    process.__name__ = f"keep_first_and_recent({n})"
    return process
