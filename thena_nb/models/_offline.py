"""What the offline models share: the requests they keep, their calls counted per run, call
ids that are the same in every run and never repeat one the model is sent (`call_number`),
scripted items turned into replies, and the request as plain data (`render`: they send
nothing over a wire).

`ScriptedModel` and `FunctionModel` are built on `OfflineModel`; nothing here is public.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any, TypeGuard

from thena_nb.core.records.model import ModelRequest, Reply
from thena_nb.core.records.types import Message, construct, finished
from thena_nb.core.runs._current import current_run
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
    "needs_ids",
    "prepared",
    "render_request",
    "with_call_ids",
]

ScriptItem = Reply | str | ErrorReply
"""What an offline model may answer with: a reply, a text answer, or `reply.error(...)`."""


class CallCounter:
    """Counts an offline model's calls per run, forgetting a run when it is gone, and keeps
    the `n` of the call ids it gave last in each (`call_<n>_<i>`)."""

    def __init__(self) -> None:
        self._counts: weakref.WeakKeyDictionary[Any, list[int]] = weakref.WeakKeyDictionary()
        self._outside = [0, 0]
        self._last: weakref.ref[Any] | None = None  # the run of the last call, and its entry
        self._entry: list[int] = self._outside

    def __getstate__(self) -> dict[str, Any]:
        return {}  # positions belong to runs in this process; a copy starts afresh

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]

    def next(self, run: Any) -> list[int]:
        """Count a call in `run` (the current run, `None` outside one); its run's entry:
        `[the 1-based number of this call within the run, the n of the ids given last]`."""
        if run is None:
            entry = self._outside
        else:
            last = self._last
            if last is None or last() is not run:  # not the run of the last call: look it up
                found = self._counts.get(run)
                if found is None:
                    found = self._counts[run] = [0, 0]
                self._last, self._entry = weakref.ref(run), found
            entry = self._entry
        entry[0] += 1
        return entry

    def ids(self, entry: list[int], call: int, messages: Sequence[Message]) -> int:
        """The `n` of the ids of call number `call` (of `entry`'s run), whose reply holds
        calls the reply helpers left without ids: `call_number(messages, call)`.

        The history is read only when it may say more than this model knows: when the last
        ids any offline model gave were not this model's in this run (another model's ids
        may stand in the history since). Otherwise nothing past its own last ids can stand
        there, and the answer is the same without reading it (a turn each in a tool loop).
        """
        global _GAVE_LAST
        if entry is _GAVE_LAST:
            n = call if call > entry[1] else entry[1] + 1
        else:
            n = call_number(messages, call)
        entry[1] = n
        _GAVE_LAST = entry if entry is not self._outside else None
        return n


_GAVE_LAST: list[int] | None = None
"""The `CallCounter` entry (a model in a run) of the last call ids an offline model gave."""


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
            >>> from thena_nb.core.records.types import Message, construct, finished
            >>> request = ModelRequest(agent="A", messages=[Message(role="user", content="Hi")])
            >>> OfflineModel("m").render(request)["messages"][0]["content"]
            'Hi'
        """
        return render_request(request)

    def _receive(self, request: ModelRequest) -> list[int]:
        """Keep `request`; count the call in the current run (`CallCounter.next`)."""
        run = current_run()
        self._log.add(request, run)
        return self._calls.next(run)


def render_request(request: ModelRequest) -> dict[str, Any]:
    """`{"messages": [...], "system": ..., "tools": [...]}`: a request as JSON-ready data."""
    return {
        "messages": [message.model_dump(mode="json") for message in request.messages],
        "system": request.system,
        "tools": [spec.model_dump() for spec in request.tools],
    }


def needs_ids(reply: Reply) -> bool:
    """Whether the reply holds calls the reply helpers left without an id."""
    for c in reply.__dict__["tool_calls"]:  # (a loop: `any()` over a generator costs more)
        if c.id == "":
            break
    else:
        return False
    return True


def with_call_ids(reply: Reply, call: int) -> Reply:
    """Give the reply helpers' calls ids that are the same in every run: `call_<n>_<i>`."""
    if not needs_ids(reply):
        return reply
    said = reply.__dict__  # plain reads: a reply per call
    # Copies without pydantic's copy protocol (a reply per call): the values are the reply's.
    made = said["tool_calls"]
    calls = [finished(c, id=f"call_{call}_{i}") if c.id == "" else c for i, c in enumerate(made)]
    return construct(Reply, {**said, "tool_calls": calls})


def call_number(messages: Sequence[Message], call: int) -> int:
    """The `n` of a call's ids (`call_<n>_<i>`): `call`, or one past the last such id in
    the history when that is as high, so no id repeats one there.

    Offline models ask it (through `CallCounter.ids`) for each reply that holds calls the
    reply helpers left without ids, so that their ids never repeat one the model is sent:
    another offline model's in the same workflow, or one that a fork, a resume or a
    continuation copied in (the model counts its calls from 1 again there). A function of
    the call's number and the history alone, so the same in every run that asks the same:
    a fork's live turn makes the ids its parent's did. What the history a model is sent
    does not show (a history processor cut it, a parallel branch beside it) the executor
    sees to: a call whose id the run holds already gets a new one
    (`core/_run_state.CallIds`).

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
    """The `n` of `call_<n>_<i>`, or of `call_<n>_<i>_<k>` (such an id the executor gave anew
    where it repeated one of the run's); `None` for any other id."""
    if not call_id.startswith("call_"):
        return None
    parts = call_id.split("_")
    if not 3 <= len(parts) <= 4 or not all(p.isdigit() for p in parts[1:]):
        return None
    return int(parts[1])


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
