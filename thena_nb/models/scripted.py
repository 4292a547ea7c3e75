"""`ScriptedModel`: an offline model that gives scripted replies, in order."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from thena_nb.core.context import current_run_id
from thena_nb.core.errors import ScriptExhaustedError
from thena_nb.core.model import ModelRequest, Reply
from thena_nb.models.reply import ErrorReply
from thena_nb.models.reply import text as text_reply

__all__ = ["ScriptedModel"]

ScriptItem = Reply | str | ErrorReply


def as_reply(item: Any, *, where: str) -> Reply:
    """Turn a scripted item into a `Reply`, raising the scripted error for `reply.error`."""
    if isinstance(item, Reply):
        return item
    if isinstance(item, str):
        return text_reply(item)
    if isinstance(item, ErrorReply):
        raise item.exc
    raise TypeError(f"{where}: expected a `Reply`, a `str` or `reply.error(...)`, got {item!r}")


class ScriptedModel:
    """A model that answers from a script: one reply per call, in order.

    Every run starts again at the first reply, so re-running a notebook cell works. It keeps
    every `ModelRequest` it received in `.requests`.

    Args:
        replies: `reply.text(...)`, `reply.tool(...)`, `reply.calls(...)`, `reply.error(...)`
            or plain strings (text answers).
        delay: Seconds each call takes (for concurrency demos and tests).
        name: The model's name in turns and reprs.

    Example:
        >>> from thena_nb.models import ScriptedModel, reply
        >>> model = ScriptedModel([reply.tool("search", query="thena"), "Found it."])
        >>> model
        ScriptedModel(2 replies)
    """

    def __init__(
        self, replies: Iterable[ScriptItem], *, delay: float = 0.0, name: str = "scripted"
    ) -> None:
        self.replies: list[ScriptItem] = list(replies)
        for i, item in enumerate(self.replies):
            if not isinstance(item, Reply | str | ErrorReply):
                raise TypeError(
                    f"ScriptedModel {name!r}: reply {i + 1} must be a `Reply`, a `str` or "
                    f"`reply.error(...)`, got {item!r}"
                )
        self.delay = delay
        self.name = name
        self.requests: list[ModelRequest] = []
        self._positions: dict[str | None, int] = {}

    async def respond(self, request: ModelRequest) -> Reply:
        """Answer with the next scripted reply of the current run."""
        self.requests.append(request)
        run_id = current_run_id()
        position = self._positions.get(run_id, 0)
        self._positions[run_id] = position + 1
        if len(self._positions) > 64:  # forget old runs; only the current one matters
            for key in list(self._positions)[:-32]:
                del self._positions[key]
        call = position + 1
        if position >= len(self.replies):
            raise ScriptExhaustedError(
                f"ScriptedModel {self.name!r} has no reply for call {call}: its script holds "
                f"{len(self.replies)} replies (agent {request.agent!r}). Add replies, or stop "
                f"the loop sooner (`until`, `max_iterations`).",
                model_name=self.name,
            )
        if self.delay:
            await asyncio.sleep(self.delay)
        return as_reply(self.replies[position], where=f"ScriptedModel {self.name!r} call {call}")

    def __repr__(self) -> str:
        extra = f", name={self.name!r}" if self.name != "scripted" else ""
        extra += f", delay={self.delay!r}" if self.delay else ""
        return f"ScriptedModel({len(self.replies)} replies{extra})"
