"""The messages of gpt-oss's harmony format, read from text.

A harmony output is a run of messages `<|start|>{header}<|message|>{body}{end}`, where the
header holds the role, `<|channel|>NAME` and, for a tool call, the recipient `to=NAME`
(after the channel or in the role part), and `{end}` is `<|end|>`, `<|call|>` or
`<|return|>`. The first message usually has no `<|start|>`, because the prompt ended with
`<|start|>assistant`; it may even start with the recipient (` to=functions.f<|channel|>…`).
A message cut off by the end of the text runs to the end.

One regex pass finds the structural tokens, so reading is linear in the text.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["Message", "is_harmony", "messages"]

_TOKEN = re.compile(r"<\|(start|message|end|call|return)\|>")
_CHANNEL = "<|channel|>"
_CHANNEL_NAME = re.compile(r"\s*([\w.-]*)")
_RECIPIENT = re.compile(r"(?:^|(?<=\s)|(?<=\|>))to=([^\s<]+)")
_IMPLICIT_LEAD = re.compile(r"(?:assistant)?\s*(?:to=[^\s<]+[^<]*?)?\s*\Z")
_HARMONY_START = re.compile(r"\s*(?:assistant\b\s*)?(?:<\|start\|>|<\|channel\|>|to=)")


class Message(NamedTuple):
    """One harmony message (a tuple of plain values: outputs can hold thousands)."""

    start: int
    end: int
    """After the end token, or where the next message starts, or the end of the text."""
    role: str
    channel: str
    recipient: str | None
    """Who the message is for when it is not the user: a tool name, `None` otherwise."""
    body: tuple[int, int]
    ended: bool
    """An end token or the next message closed the body (it was not cut off)."""

    @property
    def is_call(self) -> bool:
        """A message from the assistant to a tool."""
        return self.recipient is not None and self.role in ("", "assistant")


def is_harmony(text: str) -> bool:
    """Whether `text` is a harmony output: it starts with harmony markup."""
    return "<|message|>" in text and _HARMONY_START.match(text) is not None


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.found: list[Message] = []
        self.header_from = 0
        self.start_at = 0
        self.explicit = False
        self.header: tuple[int, str, str, str | None] | None = None
        self.body_from = -1

    def token(self, m: re.Match[str]) -> None:
        kind = m.group(1)
        if self.header is not None:
            if kind != "message":
                end = m.start() if kind == "start" else m.end()
                self.finish(m.start(), end, ended=True)
                self.restart(m, explicit=kind == "start")
            return
        if kind == "message":
            self.header = self.parse_header(m.start())
            self.body_from = m.end()
            if self.header is None:
                self.restart(m, explicit=False)
        else:
            self.restart(m, explicit=kind == "start")

    def restart(self, m: re.Match[str], *, explicit: bool) -> None:
        self.header = None
        self.header_from = m.end()
        self.explicit = explicit
        self.start_at = m.start() if explicit else m.end()

    def finish(self, body_end: int, end: int, *, ended: bool) -> None:
        assert self.header is not None
        start, role, channel, recipient = self.header
        body = (self.body_from, body_end)
        self.found.append(Message(start, end, role, channel, recipient, body, ended))
        self.header = None

    def parse_header(self, at: int) -> tuple[int, str, str, str | None] | None:
        header = self.text[self.header_from : at]
        idx = header.rfind(_CHANNEL)
        if self.explicit:
            start = self.start_at
            role = re.split(r"\s|<\|", header.strip(), maxsplit=1)[0]
            role = "" if role.startswith("to=") else role
        else:
            if idx < 0:
                return None
            lead = _IMPLICIT_LEAD.search(header[max(0, idx - 120) : idx])
            assert lead is not None  # the pattern matches the empty string at the end
            start = self.header_from + max(0, idx - 120) + lead.start()
            role = ""
            header = header[start - self.header_from :]
        channel = ""
        if (idx := header.rfind(_CHANNEL)) >= 0:
            name = _CHANNEL_NAME.match(header, idx + len(_CHANNEL))
            channel = name.group(1) if name else ""
        to = _RECIPIENT.search(header)
        recipient = to.group(1) if to else None
        if recipient == "assistant":
            recipient = None
        return start, role, channel, recipient


def messages(text: str) -> list[Message]:
    """The harmony messages of `text`, in order; `[]` if it is not a harmony output."""
    if not is_harmony(text):
        return []
    reader = _Reader(text)
    for m in _TOKEN.finditer(text):
        reader.token(m)
    if reader.header is not None:
        reader.finish(len(text), len(text), ended=False)
    return reader.found
