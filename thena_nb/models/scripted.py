"""`ScriptedModel`: an offline model that gives scripted replies, in order."""

from __future__ import annotations

import asyncio
import copy
import weakref
from collections.abc import Iterable
from typing import Any

from thena_nb.core.errors import ScriptExhaustedError
from thena_nb.core.model import ModelRequest, Reply
from thena_nb.core.run import current_run
from thena_nb.models.reply import ErrorReply
from thena_nb.models.reply import text as text_reply

__all__ = ["ScriptedModel"]

ScriptItem = Reply | str | ErrorReply


class CallCounter:
    """Counts an offline model's calls per run, forgetting a run when it is gone."""

    def __init__(self) -> None:
        self._counts: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._outside = 0

    def __getstate__(self) -> dict[str, Any]:
        return {}  # positions belong to runs in this process; a copy starts afresh

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    def next(self) -> int:
        """The 1-based number of this call within the current run."""
        run = current_run()
        if run is None:
            self._outside += 1
            return self._outside
        count = self._counts.get(run, 0) + 1
        self._counts[run] = count
        return count


def with_call_ids(reply: Reply, call: int) -> Reply:
    """Give the reply helpers' calls ids that are the same in every run: `call_<n>_<i>`."""
    if not any(c.id == "" for c in reply.tool_calls):
        return reply
    calls = [
        c.model_copy(update={"id": f"call_{call}_{i}"}) if c.id == "" else c
        for i, c in enumerate(reply.tool_calls)
    ]
    return reply.model_copy(update={"tool_calls": calls})


def as_reply(item: Any, *, where: str, call: int = 0) -> Reply:
    """Turn a scripted item into a `Reply`, raising the scripted error for `reply.error`."""
    if isinstance(item, Reply):
        return with_call_ids(item, call)
    if isinstance(item, str):
        return text_reply(item)
    if isinstance(item, ErrorReply):
        raise copy.copy(item.exc)  # a fresh copy, so notes never pile up across runs
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
        self._calls = CallCounter()
        # Call n always answers with reply n, so its ids can be fixed once, here.
        self._ready: list[Reply | ErrorReply] = [
            text_reply(item) if isinstance(item, str) else item for item in self.replies
        ]
        self._ready = [
            with_call_ids(item, i + 1) if isinstance(item, Reply) else item
            for i, item in enumerate(self._ready)
        ]

    async def respond(self, request: ModelRequest) -> Reply:
        """Answer with the next scripted reply of the current run."""
        self.requests.append(request)
        call = self._calls.next()
        position = call - 1
        if position >= len(self.replies):
            raise ScriptExhaustedError(
                f"ScriptedModel {self.name!r} has no reply for call {call}: its script holds "
                f"{len(self.replies)} replies (agent {request.agent!r}). Add replies, or stop "
                f"the loop sooner (`until`, `max_iterations`).",
                model_name=self.name,
            )
        if self.delay:
            await asyncio.sleep(self.delay)
        ready = self._ready[position]
        if isinstance(ready, ErrorReply):
            raise copy.copy(ready.exc)  # a fresh copy, so notes never pile up across runs
        return ready

    def __repr__(self) -> str:
        extra = f", name={self.name!r}" if self.name != "scripted" else ""
        extra += f", delay={self.delay!r}" if self.delay else ""
        return f"ScriptedModel({len(self.replies)} replies{extra})"
