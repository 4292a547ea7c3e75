"""`FunctionModel`: an offline model whose replies come from your function."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from thena_nb.core.records.model import ModelRequest, Reply
from thena_nb.models._offline import (
    OfflineModel,
    as_reply,
    needs_ids,
    with_call_ids,
)

__all__ = ["FunctionModel"]


class FunctionModel(OfflineModel):
    """A model that calls `fn(request)` for every reply.

    `fn` returns a `Reply`, a `str` (a text answer) or `reply.error(exc)`, or raises; it may
    be sync or async. A sync `fn` is called inline, like a sync tool: it should return at
    once. Pass `blocking=True` for one that waits (sleeps, does I/O): it then runs in a
    worker thread, so parallel branches and `Session.stop()` need not wait for it. Every
    request of its last 16 runs is kept in `.requests`.

    Example:
        >>> from thena_nb.models import FunctionModel, reply
        >>> def echo(request):
        ...     return "You said: " + request.messages[-1].content
        >>> FunctionModel(echo)
        FunctionModel(echo)
    """

    def __init__(
        self, fn: Callable[[ModelRequest], Any], *, name: str = "function", blocking: bool = False
    ) -> None:
        if not callable(fn):
            raise TypeError(f"FunctionModel needs a function of the request, got {fn!r}")
        super().__init__(name)
        self.fn = fn
        self.blocking = blocking
        """Whether a sync `fn` runs in a worker thread (it waits) rather than inline."""
        self._is_async = inspect.iscoroutinefunction(fn)

    async def respond(self, request: ModelRequest) -> Reply:
        """Call the function and turn what it returns into a `Reply`."""
        entry = self._receive(request)
        call = entry[0]
        if self._is_async:
            value = await self.fn(request)
        elif self.blocking:
            import asyncio  # only here: `from thena_nb.models import FunctionModel` defers it

            value = await asyncio.to_thread(self.fn, request)
        else:
            value = self.fn(request)
        if type(value) is Reply:  # what the reply helpers make: nothing to check or to say
            if needs_ids(value):
                return with_call_ids(value, self._calls.ids(entry, call, request.messages))
            return value
        numbered = isinstance(value, Reply) and needs_ids(value)
        ids = self._calls.ids(entry, call, request.messages) if numbered else call
        return as_reply(value, where=f"FunctionModel {self.name!r} call {call}", call=ids)

    def __repr__(self) -> str:
        label = getattr(self.fn, "__name__", repr(self.fn))
        extra = f", name={self.name!r}" if self.name != "function" else ""
        extra += ", blocking=True" if self.blocking else ""
        return f"FunctionModel({label}{extra})"
