"""Fingerprints of model requests, and replay: reusing a recorded run's turns for free.

Every turn records a `request_key`: a hash of the asking agent's configuration (`Agent.key`:
model name, system prompt, tools, output limit) and of the history it saw. A replay reuses recorded
turn `k` (its reply and its tool results, so no model call and no tool call is made) while
the new run asks the same thing at the same step, and goes live from the first turn whose
request differs (`run.replay_diverged_at`) or from `live_from`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from thena_nb.core.types import Message, Turn

if TYPE_CHECKING:
    from thena_nb.core.run import Run

__all__ = ["ForkReplay", "HistoryHasher", "Replay", "blake"]


def blake() -> Any:
    """The hash every fingerprint of a request is made with."""
    return hashlib.blake2b(digest_size=16)


def _message_bytes(m: Message) -> bytes:
    d = m.__dict__
    calls = d["tool_calls"]
    shown = repr([(c.id, c.name, c.arguments, c.source) for c in calls]) if calls else ""
    return (
        f"{d['role']}\x1e{d['agent']}\x1e{d['content']}\x1e{d['tool_call_id']}"
        f"\x1e{d['is_error']}\x1e{shown}\x1d"
    ).encode()


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
        return str(out.hexdigest())

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
        self._states = getattr(recorded, "states", None) or {}

    def lookup(
        self, index: int, path: str, request_key: str, *, in_branch: bool = False
    ) -> Turn | None:
        """The recorded turn to reuse for turn `index`, or `None` to go live.

        Inside a parallel block the final index is known only when the block merges, so a
        branch's turn is matched by its step path and request instead.
        """
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
        if turn.step_path != path or turn.request_key != request_key:
            self.diverged_at = index
            return None
        return turn

    def state_after(self, index: int) -> Any:
        """The recorded state snapshot after turn `index`, if one was kept."""
        return self._states.get(index)


class ForkReplay(Replay):
    """Serve turns `0..at-1` by step path alone: a fork changes the workflow on purpose.

    A plain replay also compares each request's key, so a changed prompt would replay
    nothing; a fork keeps the recorded turns before `at` whatever they asked.
    """

    def __init__(self, recorded: Run, at: int) -> None:
        super().__init__(recorded, live_from=at)
        self._before = {t.index: t for t in recorded.turns if t.index < at}
        self._branch_paths = {t.step_path for t in recorded.turns if t.branch is not None}
        self._branches: dict[str, list[Turn]] = {}
        for t in recorded.turns:
            if t.branch is not None and t.index < at:
                self._branches.setdefault(t.step_path, []).append(t)

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
                self.diverged_at = index
            return None
        if self.live_from is not None and index >= self.live_from:
            return None
        turn = self._before.get(index)
        if turn is None:
            return None
        if turn.step_path != path:
            self.diverged_at = index
            return None
        return turn
