"""What the offline models share: the requests they keep, their calls counted per run, call
ids that are the same in every run and never repeat one in the history, scripted items
turned into replies, and the request as plain data (`render`: they send nothing over a
wire).

`ScriptedModel` and `FunctionModel` are built on `OfflineModel`; nothing here is public.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any, TypeGuard

from thena_nb.core._current import current_run
from thena_nb.core.model import ModelRequest, Reply
from thena_nb.core.types import Message, construct, finished
from thena_nb.models.reply import ErrorReply
from thena_nb.models.reply import text as text_reply

__all__ = [
    "CallCounter",
    "OfflineModel",
    "ScriptItem",
    "answer",
    "as_reply",
    "call_number",
    "is_script_item",
    "prepared",
    "render_request",
    "with_call_ids",
]

ScriptItem = Reply | str | ErrorReply
"""What an offline model may answer with: a reply, a text answer, or `reply.error(...)`."""


class CallCounter:
    """Counts an offline model's calls per run, forgetting a run when it is gone; and where
    the run's call ids start (past those its history holds already: a resumed run)."""

    def __init__(self) -> None:
        self._counts: weakref.WeakKeyDictionary[Any, list[int]] = weakref.WeakKeyDictionary()
        self._outside = 0
        self._last: weakref.ref[Any] | None = None  # the run of the last call, and its entry
        self._entry: list[int] = [0, 0]

    def __getstate__(self) -> dict[str, Any]:
        return {}  # positions belong to runs in this process; a copy starts afresh

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    def next(self, history: Sequence[Message], run: Any) -> tuple[int, int]:
        """The 1-based number of this call within `run` (the current run, `None` outside
        one), and the `n` of its call ids (`call_<n>_<i>`): the same, unless the run's first
        call found such ids in `history` already (a resumed run), which the ids then
        continue after."""
        if run is None:
            self._outside += 1
            return self._outside, self._outside
        last = self._last
        if last is None or last() is not run:  # not the run of the last call: look it up
            entry = self._counts.get(run)
            if entry is None:  # the run's first call: the history holds no ids of this run yet
                entry = self._counts[run] = [0, call_number(history, 1) - 1]
            self._last, self._entry = weakref.ref(run), entry
        entry = self._entry
        entry[0] += 1
        return entry[0], entry[0] + entry[1]


KEPT_RUNS = 16
"""How many runs' requests an offline model keeps (`OfflineModel.requests`)."""


class RequestLog:
    """An offline model's requests, kept per run for its last `KEPT_RUNS` runs: a model used
    for many runs does not hold every history it was ever sent."""

    def __init__(self) -> None:
        self._runs: dict[int, list[ModelRequest]] = {}  # by a serial number, oldest first
        self._of: weakref.WeakKeyDictionary[Any, list[ModelRequest]] = (
            weakref.WeakKeyDictionary()
        )  # each run's log, found again when runs take turns
        self._serial = 0
        self._outside: list[ModelRequest] = []  # requests made outside any run
        self._last: weakref.ref[Any] | None = None  # the run of the last request, and its log
        self._last_log: list[ModelRequest] = []

    def __getstate__(self) -> dict[str, Any]:
        return {}  # requests belong to runs in this process; a copy starts afresh

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    def add(self, request: ModelRequest, run: Any) -> None:
        """Keep `request` in the log of `run` (the current run, `None` outside one)."""
        if run is None:
            self._outside.append(request)
            return
        last = self._last
        if last is None or last() is not run:
            log = self._of.get(run)
            if log is None:  # the run's first request (a rerun under the same id is new)
                log = self._of[run] = []
                self._serial += 1
                self._runs[self._serial] = log
                while len(self._runs) > KEPT_RUNS:
                    del self._runs[next(iter(self._runs))]  # the oldest run's requests go
            self._last, self._last_log = weakref.ref(run), log
        self._last_log.append(request)

    def requests(self) -> Requests:
        """Every kept request: those of each kept run, in the order the runs first asked,
        then those made outside a run."""
        out = Requests(self)
        for log in list(self._runs.values()):
            out.extend(log)
        out.extend(self._outside)
        return out

    def clear(self) -> None:
        """Forget every request."""
        self._runs.clear()
        self._of.clear()
        self._outside.clear()
        self._last, self._last_log = None, []


class Requests(list[ModelRequest]):
    """`OfflineModel.requests`: a list of the requests kept; `clear()` also clears the log."""

    def __init__(self, log: RequestLog) -> None:
        super().__init__()
        self._log = log

    def clear(self) -> None:
        """Forget every request, here and in the model's log."""
        super().clear()
        self._log.clear()


class OfflineModel:
    """Keeps the requests of its last `KEPT_RUNS` runs in `.requests` and numbers the calls
    of each run."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._log = RequestLog()
        self._calls = CallCounter()

    @property
    def requests(self) -> Requests:
        """The requests received in the last `KEPT_RUNS` runs (16), in the order the runs
        first asked, then those made outside a run. `requests.clear()` forgets them all."""
        return self._log.requests()

    def render(self, request: ModelRequest) -> dict[str, Any]:
        """The request as plain data: `messages`, `system` and `tools` (no wire to show).

        Example:
            >>> from thena_nb.core.types import Message, construct, finished
            >>> request = ModelRequest(agent="A", messages=[Message(role="user", content="Hi")])
            >>> OfflineModel("m").render(request)["messages"][0]["content"]
            'Hi'
        """
        return render_request(request)

    def _receive(self, request: ModelRequest) -> tuple[int, int]:
        """Keep `request`; return the 1-based number of this call within the current run
        and the `n` of its call ids (`CallCounter.next`)."""
        run = current_run()
        self._log.add(request, run)
        return self._calls.next(request.messages, run)


def render_request(request: ModelRequest) -> dict[str, Any]:
    """`{"messages": [...], "system": ..., "tools": [...]}`: a request as JSON-ready data."""
    return {
        "messages": [message.model_dump(mode="json") for message in request.messages],
        "system": request.system,
        "tools": [spec.model_dump() for spec in request.tools],
    }


def with_call_ids(reply: Reply, call: int) -> Reply:
    """Give the reply helpers' calls ids that are the same in every run: `call_<n>_<i>`."""
    said = reply.__dict__  # plain reads: a reply per call
    made = said["tool_calls"]
    for c in made:  # (a loop: `any()` over a generator costs more per call)
        if c.id == "":
            break
    else:
        return reply
    # Copies without pydantic's copy protocol (a reply per call): the values are the reply's.
    calls = [finished(c, id=f"call_{call}_{i}") if c.id == "" else c for i, c in enumerate(made)]
    return construct(Reply, {**said, "tool_calls": calls})


def call_number(messages: Sequence[Message], call: int) -> int:
    """The `n` of a call's ids (`call_<n>_<i>`): `call`, or one past the last such id in
    the history when that is as high, so no id repeats one there.

    Ids only grow along the history, so the latest assistant message with such ids holds
    the highest: the search stops there.
    """
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if message.role != "assistant" or not message.tool_calls:
            continue
        numbers = [n for c in message.tool_calls if (n := _id_number(c.id)) is not None]
        if numbers:
            return max(call, max(numbers) + 1)
    return call


def _id_number(call_id: str) -> int | None:
    if not call_id.startswith("call_"):
        return None
    parts = call_id.split("_")
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


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
    """Turn a scripted item into a `Reply`, raising the scripted error for `reply.error`;
    `call` is the `n` of its call ids."""
    if not is_script_item(item):
        raise TypeError(f"{where}: expected a `Reply`, a `str` or `reply.error(...)`, got {item!r}")
    return answer(prepared(item, call))
