"""Request keys: the fingerprint of what a turn asked, which replay matches on.

A live turn's key hashes the asking agent's configuration (`Agent.key`) and the history it
saw (`HistoryHasher`, a running hash, O(new messages) per request); a turn imported from a
trace holds a *content key* (`content_key`, prefixed `otel:`) instead. Stored runs hold keys
made this way, so the bytes hashed must never change. `engine/_replay.py` uses them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from thena_nb.core.records.types import Message, ToolCall

__all__ = [
    "IMPORTED_PREFIX",
    "UNCAPTURED_KEY",
    "HistoryHasher",
    "blake",
    "content_key",
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

    >>> from thena_nb.core.records.types import Message
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
