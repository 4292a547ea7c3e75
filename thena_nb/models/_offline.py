"""What the offline models share: the requests they keep, their calls counted per run, call
ids that are the same in every run, scripted items turned into replies, and the request as
plain data (`render`: they send nothing over a wire).

`ScriptedModel` and `FunctionModel` are built on `OfflineModel`; nothing here is public.
"""

from __future__ import annotations

import weakref
from typing import Any, TypeGuard

from thena_nb.core.model import ModelRequest, Reply
from thena_nb.core.run import current_run
from thena_nb.models.reply import ErrorReply
from thena_nb.models.reply import text as text_reply

__all__ = [
    "CallCounter",
    "OfflineModel",
    "ScriptItem",
    "answer",
    "as_reply",
    "is_script_item",
    "prepared",
    "render_request",
    "with_call_ids",
]

ScriptItem = Reply | str | ErrorReply
"""What an offline model may answer with: a reply, a text answer, or `reply.error(...)`."""


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


class OfflineModel:
    """Keeps every request it receives in `.requests` and numbers the calls of each run."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.requests: list[ModelRequest] = []
        self._calls = CallCounter()

    def render(self, request: ModelRequest) -> dict[str, Any]:
        """The request as plain data: `messages`, `system` and `tools` (no wire to show).

        Example:
            >>> from thena_nb.core.types import Message
            >>> request = ModelRequest(agent="A", messages=[Message(role="user", content="Hi")])
            >>> OfflineModel("m").render(request)["messages"][0]["content"]
            'Hi'
        """
        return render_request(request)

    def _receive(self, request: ModelRequest) -> int:
        """Keep `request`; return the 1-based number of this call within the current run."""
        self.requests.append(request)
        return self._calls.next()


def render_request(request: ModelRequest) -> dict[str, Any]:
    """`{"messages": [...], "system": ..., "tools": [...]}`: a request as JSON-ready data."""
    return {
        "messages": [message.model_dump(mode="json") for message in request.messages],
        "system": request.system,
        "tools": [spec.model_dump() for spec in request.tools],
    }


def with_call_ids(reply: Reply, call: int) -> Reply:
    """Give the reply helpers' calls ids that are the same in every run: `call_<n>_<i>`."""
    if not any(c.id == "" for c in reply.tool_calls):
        return reply
    calls = [
        c.model_copy(update={"id": f"call_{call}_{i}"}) if c.id == "" else c
        for i, c in enumerate(reply.tool_calls)
    ]
    return reply.model_copy(update={"tool_calls": calls})


def is_script_item(item: object) -> TypeGuard[ScriptItem]:
    """Whether `item` is something an offline model may answer with."""
    return isinstance(item, Reply | str | ErrorReply)


def prepared(item: ScriptItem, call: int) -> Reply | ErrorReply:
    """`item` as call number `call` gives it: text as a reply, calls with their stable ids."""
    if isinstance(item, str):
        return text_reply(item)
    if isinstance(item, Reply):
        return with_call_ids(item, call)
    return item


def answer(item: Reply | ErrorReply) -> Reply:
    """The reply, or raise the scripted error of `reply.error(...)`."""
    if isinstance(item, ErrorReply):
        item.raise_it()  # the very exception given, without what earlier runs added
    return item


def as_reply(item: Any, *, where: str, call: int = 0) -> Reply:
    """Turn a scripted item into a `Reply`, raising the scripted error for `reply.error`."""
    if not is_script_item(item):
        raise TypeError(f"{where}: expected a `Reply`, a `str` or `reply.error(...)`, got {item!r}")
    return answer(prepared(item, call))
