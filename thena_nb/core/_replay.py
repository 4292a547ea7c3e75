"""Fingerprints of model requests, and replay: reusing a recorded run's turns for free.

Every turn records a `request_key`: a hash of the asking agent's configuration (`Agent.key`:
model name, system prompt, tools, output limit) and of the history it saw. A replay reuses recorded
turn `k` (its reply and its tool results, so no model call and no tool call is made) while
the new run asks the same thing at the same step, and goes live from the first turn whose
request differs (`run.replay_diverged_at`) or from `live_from`.

Messages a fork put into the history (`run.fork(k, inject=...)`, the follow-up of
`run.continue_with`) are user messages that no turn wrote; a replay puts them back before the
same turn, so the requests match again.

Runs imported from OpenTelemetry traces (`thena_nb.telemetry.runs_from_spans`) cannot hold
the live keys: what an agent sends besides the history (its system prompt, tools, settings)
is hashed into them, and a trace does not carry it all. Their turns hold a *content key*
instead (`content_key`, prefixed `otel:`): a fingerprint of the conversation before the turn
(each message's role, text and calls by name and arguments). An imported turn is served while
the live turn is the same agent's and its history says the same (`Replay.lookup`); a changed
system prompt or tool set is not seen. A run imported without message content has turns
keyed `UNCAPTURED_KEY`, and a replay of it is refused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from thena_nb.core.types import Message, ToolCall, Turn, TurnInfo, finished

if TYPE_CHECKING:
    from thena_nb.core.model import Reply
    from thena_nb.core.run import Run

__all__ = [
    "IMPORTED_PREFIX",
    "UNCAPTURED_KEY",
    "ForkReplay",
    "HistoryHasher",
    "Replay",
    "blake",
    "content_key",
    "inserted_messages",
]

IMPORTED_PREFIX = "otel:"
"""How the request key of a turn imported from a trace starts (`content_key`)."""
UNCAPTURED_KEY = "otel:uncaptured"
"""The request key of an imported turn whose trace held no message content."""


def blake() -> hashlib.blake2b:
    """The hash every fingerprint of a request is made with."""
    return hashlib.blake2b(digest_size=16)


def _message_bytes(m: Message) -> bytes:
    """What a message adds to a request key. Its calls are written as
    `repr([(c.id, c.name, c.arguments, c.source), ...])` spells them: stored runs hold keys
    made this way, so the bytes must never change (a replay of them would go live)."""
    d = m.__dict__
    calls = d["tool_calls"]
    shown = f"[{', '.join(map(_call_repr, calls))}]" if calls else ""
    return (
        f"{d['role']}\x1e{d['agent']}\x1e{d['content']}\x1e{d['tool_call_id']}"
        f"\x1e{d['is_error']}\x1e{shown}\x1d"
    ).encode()


def _call_repr(call: ToolCall) -> str:
    """`repr((c.id, c.name, c.arguments, c.source))`, without making the tuple (a call each)."""
    c = call.__dict__
    return f"({c['id']!r}, {c['name']!r}, {c['arguments']!r}, {c['source']!r})"


def content_key(history: Sequence[Message]) -> str:
    """The key of an imported turn that saw `history`: each message's role, text, and calls by
    name and arguments (no ids, agents or error flags, which traces spell differently).

    >>> from thena_nb.core.types import Message
    >>> content_key([Message(role="user", content="hi")]).startswith(IMPORTED_PREFIX)
    True
    """
    h = blake()
    for m in history:
        calls = [
            (c.name, json.dumps(c.arguments, sort_keys=True, default=str)) for c in m.tool_calls
        ]
        h.update(repr((m.role, m.content, calls)).encode())
    return IMPORTED_PREFIX + h.hexdigest()


def _imported(key: str | None) -> bool:
    return key is not None and key.startswith(IMPORTED_PREFIX)


class HistoryHasher:
    """A running hash of an append-only history: O(new messages) per request."""

    __slots__ = ("_h", "length")

    def __init__(self) -> None:
        self._h = blake()
        self.length = 0

    def request_key(self, history: Sequence[Message], agent_key: str) -> str:
        """The key of a request by an agent (`agent_key`) that sees all of `history`."""
        h = self._h
        for i in range(self.length, len(history)):
            h.update(_message_bytes(history[i]))
        self.length = len(history)
        out = h.copy()
        out.update(agent_key.encode())
        return out.hexdigest()

    def fork(self, history: Sequence[Message]) -> HistoryHasher:
        """A hasher for a branch that starts from `history` (this hasher's own history)."""
        self.request_key(history, "")
        child = HistoryHasher.__new__(HistoryHasher)
        child._h = self._h.copy()
        child.length = self.length
        return child


class Replay:
    """Serve recorded turns to a new run while its requests match the recording.

    Args:
        recorded: The run to reuse.
        live_from: Go live from this turn index on, whatever the requests.
        rerun_tools: Run the tools again instead of reusing their recorded results.
    """

    def __init__(
        self, recorded: Run, *, live_from: int | None = None, rerun_tools: bool = False
    ) -> None:
        self.recorded = recorded
        self.live_from = live_from
        self.rerun_tools = rerun_tools
        self.diverged_at: int | None = None
        self._by_index = {t.index: t for t in recorded.turns}
        self._by_request: dict[tuple[str, str | None], list[Turn]] = {}
        for t in recorded.turns:
            if t.branch is not None:
                self._by_request.setdefault((t.step_path, t.request_key), []).append(t)
        self._open: dict[tuple[str, str | None], list[Turn]] = {}
        """Branch turns of a block still open when the recording ended (`run.open_turns`):
        a resume reuses them whatever else diverged, as their requests match exactly."""
        for t in getattr(recorded, "open_turns", ()):
            self._open.setdefault((t.step_path, t.request_key), []).append(t)
        self._states = getattr(recorded, "states", None) or {}
        self.inserts: dict[int, list[Message]] = inserted_messages(recorded.history)
        """The user messages no turn wrote, by the index of the turn they come before."""
        keys = {t.request_key for t in recorded.turns}
        if UNCAPTURED_KEY in keys:
            raise ValueError(
                f"run {recorded.run_id!r} was imported from a trace without message content "
                f"(content capture was off): it can be shown, diffed and scored, not replayed. "
                f"Record the trace with content capture on to replay it."
            )
        self.imported = any(_imported(k) for k in keys)
        """A recording imported from a trace: the request phase shows it each history (`see`)."""
        self._seen: Sequence[Message] | None = None

    def insert_before(self, index: int, history: list[Message]) -> None:
        """Put back the messages the recording had before turn `index`'s request (the
        request phase asks, at the top level, when `inserts` is not empty)."""
        if self.diverged_at is not None:
            return
        if self.live_from is not None and index > self.live_from:
            return
        history.extend(self.inserts.pop(index, ()))

    def lookup(
        self, index: int, path: str, request_key: str, *, in_branch: bool = False
    ) -> Turn | None:
        """The recorded turn to reuse for turn `index`, or `None` to go live.

        Inside a parallel block the final index is known only when the block merges, so a
        branch's turn is matched by its step path and request instead.
        """
        if in_branch and self._open:
            found = self._open.get((path, request_key))
            if found:
                return found.pop(0)
        if self.diverged_at is not None:
            return None
        if self.live_from is not None and index >= self.live_from:
            return None
        if in_branch:
            queue = self._by_request.get((path, request_key))
            if not queue:
                self.diverged_at = index
                return None
            return queue.pop(0)
        turn = self._by_index.get(index)
        if turn is None:
            return None  # the recording ended here; going on live is not a divergence
        if not self._matches(turn, path, request_key):
            self.diverged_at = index
            return None
        return turn

    def see(self, history: Sequence[Message]) -> None:
        """The history of the turn about to be asked: what an imported turn's content key is
        checked against (the request phase calls this when `imported`)."""
        self._seen = history

    def _matches(self, turn: Turn, path: str, request_key: str) -> bool:
        """Whether recorded `turn` answers the live request: same step and key; an imported
        turn by its agent's name and the content of the history it saw."""
        if not _imported(turn.request_key):
            return turn.step_path == path and turn.request_key == request_key
        agent = path.rsplit("/", 1)[-1].partition(".")[2]
        seen = self._seen
        return agent == turn.agent and seen is not None and content_key(seen) == turn.request_key

    def state_after(self, index: int) -> Any:
        """The recorded state snapshot after turn `index`, if one was kept."""
        return self._states.get(index)

    def copies(self, turn: Turn) -> bool:
        """Whether served `turn` is kept as it was asked, request key included (a plain
        replay serves only turns whose key matches anyway; an imported turn's content key is
        not a live key, so the live one is kept)."""
        return not _imported(turn.request_key)


class ForkReplay(Replay):
    """Serve turns `0..at-1` by step path alone: a fork changes the workflow on purpose.

    A plain replay also compares each request's key, so a changed prompt would replay
    nothing; a fork keeps the recorded turns before `at` whatever they asked.

    Turn `at` itself is live, unless an edit serves it: with `reply`, that reply instead of
    a model call, whose calls then run live (the turn has `replayed=False`, `attempts=0`);
    with `results`, the recorded reply and results, those calls' replaced (`decision=
    "respond"`; `replayed=True`, since nothing was called). `inject` goes into the history
    before turn `at`'s request, after what the recording had there. `afork` checks them.
    """

    def __init__(
        self,
        recorded: Run,
        at: int,
        *,
        reply: Reply | None = None,
        results: Mapping[str, str] | None = None,
        inject: Sequence[Message] = (),
    ) -> None:
        super().__init__(recorded, live_from=at)
        self._before = {t.index: t for t in recorded.turns if t.index < at}
        self._branch_paths = {t.step_path for t in recorded.turns if t.branch is not None}
        self._branches: dict[str, list[Turn]] = {}
        for t in recorded.turns:
            if t.branch is not None and t.index < at:
                self._branches.setdefault(t.step_path, []).append(t)
        self._reply = reply
        self._results = dict(results) if results else None
        self._inject = list(inject)
        if self._inject:
            self.inserts.setdefault(at, [])

    @property
    def inject_left(self) -> bool:
        """Whether the injected messages are still unsent: the run never reached turn `at`."""
        return bool(self._inject)

    def insert_before(self, index: int, history: list[Message]) -> None:
        super().insert_before(index, history)
        if index == self.live_from and self._inject:
            history.extend(self._inject)  # asked for: put in even where the fork went live
            self._inject = []

    def lookup(
        self, index: int, path: str, request_key: str, *, in_branch: bool = False
    ) -> Turn | None:
        if self.diverged_at is not None:
            return None
        if in_branch:
            queue = self._branches.get(path)
            if queue:
                return queue.pop(0)
            if path not in self._branch_paths:
                self._part(index, path)
            return None
        if index == self.live_from and (self._reply is not None or self._results is not None):
            return self._edited(index, path)
        if self.live_from is not None and index >= self.live_from:
            return None
        turn = self._before.get(index)
        if turn is None:
            return None
        if turn.step_path != path:
            self._part(index, path)
            return None
        return turn

    def _part(self, index: int, path: str) -> None:
        """The forked workflow took another path at turn `index`: go live from here, unless
        an edit of a later turn waits (it would apply to a turn the run never had)."""
        if self._reply is not None or self._results is not None:
            raise ValueError(
                f"the forked workflow runs {path!r} at turn {index}, where the run ran "
                f"another step; the edit of turn {self.live_from} does not apply there. Fork "
                f"without `changes=` that alter the steps before it."
            )
        self.diverged_at = index

    def copies(self, turn: Turn) -> bool:
        # Turns before `at` are copies of the parent's, asked as the parent asked them
        # (`run.diff` of parent and fork agrees with `first_divergence`); an edited turn
        # was asked by the changed workflow.
        return self.live_from is None or turn.index < self.live_from

    def state_after(self, index: int) -> Any:
        # An edited turn keeps the state as it stood before it (its tools ran anew, or not).
        if self.live_from is not None and index >= self.live_from:
            return None
        return super().state_after(index)

    def _edited(self, index: int, path: str) -> Turn:
        """Turn `index` as the edit serves it (once): a new reply, or replaced results."""
        turn = self._by_index[index]
        if turn.step_path != path:
            self._part(index, path)
        reply, results = self._reply, self._results
        self._reply = self._results = None
        if reply is not None:
            self.rerun_tools = True  # the new reply's calls run live; no turn after is served
            return with_reply(turn, reply)
        assert results is not None
        return with_results(turn, results)


def inserted_messages(history: Sequence[Message]) -> dict[int, list[Message]]:
    """The user messages after the input, by the index of the turn they come before.

    No turn writes a user message and every turn writes one assistant message, so the
    assistant messages before one count the turns before it (a parallel block's too).
    """
    out: dict[int, list[Message]] = {}
    turns = 0
    for m in history[1:]:
        role = m.role
        if role == "assistant":
            turns += 1
        elif role == "user":
            out.setdefault(turns, []).append(m)
    return out


def with_reply(turn: Turn, reply: Reply) -> Turn:
    """`turn` as if the model had answered `reply`: its calls not run yet, ids filled in
    (`edit_<turn>_<n>`) where the reply helpers left them empty."""
    calls = [
        finished(c, id=c.id or f"edit_{turn.index}_{i}", ok=None, result=None, error=None)
        for i, c in enumerate(reply.tool_calls)
    ]
    info = TurnInfo(called_tool=bool(calls), response=reply.text)
    return turn.model_copy(
        update={
            "info": info,
            "tool_calls": calls,
            "finish_reason": reply.finish_reason or ("tool_use" if calls else "end_turn"),
            "input_tokens": reply.input_tokens,
            "output_tokens": reply.output_tokens,
            "cache_read_tokens": reply.cache_read_tokens,
            "cache_write_tokens": reply.cache_write_tokens,
            "reasoning": reply.reasoning,
            "reasoning_tokens": reply.reasoning_tokens,
        }
    )


def with_results(turn: Turn, results: Mapping[str, str]) -> Turn:
    """`turn` with the results of some calls replaced by `results` (`decision="respond"`)."""
    calls = [
        finished(
            c,
            ok=True,
            result=results[c.id],
            error=None,
            retries=0,
            decision="respond",
            traceback=None,
            result_cut=None,
        )
        if c.id in results
        else c
        for c in turn.tool_calls
    ]
    return turn.model_copy(update={"tool_calls": calls})
