"""`ScriptedModel`: an offline model that gives scripted replies, in order."""

from __future__ import annotations

from collections.abc import Iterable

from thena_nb.core.records.errors import ScriptExhaustedError
from thena_nb.core.records.model import ModelRequest, Reply
from thena_nb.models._offline import (
    OfflineModel,
    ScriptItem,
    answer,
    is_script_item,
    needs_ids,
    prepared,
)

__all__ = ["ScriptedModel"]


class ScriptedModel(OfflineModel):
    """A model that answers from a script: one reply per call, in order.

    Every run starts again at the first reply, so re-running a notebook cell works. It keeps
    the `ModelRequest`s of its last 16 runs in `.requests`.

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
            if not is_script_item(item):
                raise TypeError(
                    f"ScriptedModel {name!r}: reply {i + 1} must be a `Reply`, a `str` or "
                    f"`reply.error(...)`, got {item!r}"
                )
        super().__init__(name)
        self.delay = delay
        # Call n always answers with reply n, so its ids can be fixed once, here (`respond`
        # renumbers them past those the history it is sent holds already: another offline
        # model's, a resumed or forked run's).
        self._ready = [prepared(item, i + 1) for i, item in enumerate(self.replies)]
        self._numbered = [isinstance(item, Reply) and needs_ids(item) for item in self.replies]

    async def respond(self, request: ModelRequest) -> Reply:
        """Answer with the next scripted reply of the current run."""
        entry = self._receive(request)
        call = entry[0]
        position = call - 1
        if position >= len(self.replies):
            raise ScriptExhaustedError(
                f"ScriptedModel {self.name!r} has no reply for call {call}: its script holds "
                f"{len(self.replies)} replies (agent {request.agent!r}). Add replies, or stop "
                f"the loop sooner (`until`, `max_iterations`).",
                model_name=self.name,
            )
        # Numbered from what was asked (the history), before any wait.
        numbered = self._numbered[position]
        ids = self._calls.ids(entry, call, request.messages) if numbered else call
        if self.delay:
            import asyncio  # only here: `from thena_nb.models import ScriptedModel` defers it

            await asyncio.sleep(self.delay)
        if ids != call:  # past the ids the history holds already
            return answer(prepared(self.replies[position], ids))
        return answer(self._ready[position])

    def __repr__(self) -> str:
        extra = f", name={self.name!r}" if self.name != "scripted" else ""
        extra += f", delay={self.delay!r}" if self.delay else ""
        return f"ScriptedModel({len(self.replies)} replies{extra})"
