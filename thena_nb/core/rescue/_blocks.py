"""What every format reader shares: found calls, spans of text a reader claims, blocks
between an opening and a closing marker, masking, fences, and "the JSON value this text
starts with"."""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from thena_nb.core.rescue._json import FAIL, Budget, Context, RawCall, json_chunks, load_json

__all__ = [
    "Block",
    "Finder",
    "Found",
    "Pass",
    "Span",
    "blocks",
    "fences",
    "first_json",
    "first_json_object",
    "inline_code",
    "mask",
    "tag",
]

Span = tuple[int, int]


@dataclass(frozen=True)
class Found:
    """A call found in the text, at `start` (and `order` among calls sharing a start)."""

    start: int
    order: int
    call: RawCall


@dataclass
class Pass:
    """What one reader returns: the calls it found and the spans it read."""

    found: list[Found] = field(default_factory=list)
    claimed: list[Span] = field(default_factory=list)


Finder = Callable[[str, Context], Pass]
"""A format reader: the prepared text and the context in, calls and claimed spans out."""


def mask(text: str, spans: Sequence[Span]) -> str:
    """`text` with every span replaced by spaces (newlines kept), positions unchanged."""
    if not spans:
        return text
    parts: list[str] = []
    pos = 0
    for a, b in sorted(spans):
        a = max(a, pos)
        if b <= a:
            continue
        parts.append(text[pos:a])
        parts.append(_blank(text[a:b]))
        pos = b
    parts.append(text[pos:])
    out = "".join(parts)
    assert len(out) == len(text)
    return out


def _blank(piece: str) -> str:
    """`piece` with every character but newlines replaced by a space."""
    return "\n".join(" " * len(line) for line in piece.split("\n"))


# -- blocks between an opening and a closing marker ------------------------------------------


class Block(NamedTuple):
    """The text from an opening marker to its closing marker (or to where it stops).

    A tuple of plain values: a text can hold tens of thousands of markers, and tuples of
    numbers and strings cost the garbage collector nothing.
    """

    start: int
    body_start: int
    body_end: int
    end: int
    closed: bool
    """The closing marker was found."""
    at_end: bool
    """The closing marker is missing and the block runs to the end of the text."""
    name: str
    """The opener's first group that matched (a tool or parameter name), or `""`."""

    @property
    def body(self) -> Span:
        return self.body_start, self.body_end

    @property
    def usable(self) -> bool:
        """Closed, or cut only by the end of the text; a block that runs into the next
        opener without closing holds no call of its own markup."""
        return self.closed or self.at_end


def blocks(text: str, opener: re.Pattern[str], closer: re.Pattern[str]) -> list[Block]:
    """Blocks from each opener to its closer; a block with no closer stops at the next
    opener or at the end of the text."""
    closes = [m.span() for m in closer.finditer(text)]
    close_starts = [c[0] for c in closes]
    opens = [(m.start(), m.end(), _first_group(m)) for m in opener.finditer(text)]
    found: list[Block] = []
    pos = 0
    for k, (start, body, name) in enumerate(opens):
        if start < pos:
            continue
        limit = opens[k + 1][0] if k + 1 < len(opens) else len(text)
        i = bisect_left(close_starts, body)
        if i < len(closes) and closes[i][0] < limit:
            block = Block(start, body, closes[i][0], closes[i][1], True, False, name)
        else:
            block = Block(start, body, limit, limit, False, limit == len(text), name)
        found.append(block)
        pos = block.end
    return found


def _first_group(m: re.Match[str]) -> str:
    return next((g for g in m.groups() if g is not None), "")


_NS = r"(?:[A-Za-z][\w-]*:|[|｜]DSML[|｜])?"
"""An optional namespace on a tag: `<minimax:tool_call>`, `<seed:tool_call>`, DeepSeek's
`<｜DSML｜invoke>`."""


def tag(name: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Opening and closing patterns for the XML-like tag `name`, with any namespace."""
    return re.compile(rf"<{_NS}{name}>"), re.compile(rf"</{_NS}{name}>")


# -- fences -----------------------------------------------------------------------------------

_FENCE = re.compile(r"(?m)^[ \t]*(```+|~~~+)[ \t]*([\w+.-]*)[^\n]*$")


def fences(text: str) -> list[tuple[int, int, int]]:
    """Fenced code blocks as `(start, body start, end)`; an unclosed fence runs to the end."""
    found: list[tuple[int, int, int]] = []
    opener: re.Match[str] | None = None
    for m in _FENCE.finditer(text):
        if opener is None:
            opener = m
        elif m.group(1)[0] == opener.group(1)[0] and not m.group(2):
            found.append((opener.start(), opener.end(), m.end()))
            opener = None
    if opener is not None:
        found.append((opener.start(), opener.end(), len(text)))
    return found


_TICKS = re.compile(r"`+|\n")


def inline_code(text: str) -> list[Span]:
    """Inline code spans (`` `…` `` and ``` ``…`` ```), CommonMark-style: a run of one or two
    backticks up to the next run of the same length on the same line. Linear: each run
    learns where the next run of its length is in one backward pass per line."""
    if "`" not in text:
        return []
    spans: list[Span] = []
    line: list[Span] = []
    for m in _TICKS.finditer(text + "\n"):
        if m.group() != "\n":
            line.append(m.span())
            continue
        if len(line) >= 2:
            spans.extend(_pair_runs(line))
        line = []
    return spans


def _pair_runs(runs: list[Span]) -> list[Span]:
    following: list[int] = [-1] * len(runs)
    last: dict[int, int] = {}
    for k in range(len(runs) - 1, -1, -1):
        width = runs[k][1] - runs[k][0]
        following[k] = last.get(width, -1)
        last[width] = k
    spans: list[Span] = []
    k = 0
    while k < len(runs):
        j = following[k]
        if j < 0 or runs[k][1] - runs[k][0] > 2:
            k += 1
            continue
        spans.append((runs[k][0], runs[j][1]))
        k = j + 1
    return spans


def fence_language(text: str, start: int, body: int) -> str:
    """The language word of the fence opened at `start`."""
    return text[start:body].strip().strip("`~").strip().split(" ")[0].lower()


# -- the JSON value a text starts with --------------------------------------------------------


def first_json(chunk: str, budget: Budget, *, at_end: bool) -> object:
    """The JSON object or list `chunk` starts with (after whitespace or a fence), else
    `FAIL`. When `at_end`, closers missing where the text ends may be added. Each call
    takes one candidate from `budget`."""
    if not budget.candidate():
        return FAIL
    stripped = chunk.lstrip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        stripped = stripped.rsplit("```", 1)[0] if "```" in stripped else stripped
    stripped = stripped.strip()
    if not stripped.startswith(("{", "[")):
        return FAIL
    pieces, tails = json_chunks(stripped, at_end=at_end)
    if pieces and pieces[0][0] == 0:
        return load_json(pieces[0][1], budget=budget)
    if tails and tails[0][0] == 0:
        return load_json(tails[0][1], closing=True, budget=budget)
    return FAIL


def first_json_object(chunk: str, budget: Budget, *, at_end: bool) -> object:
    """Like `first_json`, for an object only."""
    value = first_json(chunk, budget, at_end=at_end)
    return value if isinstance(value, dict) else FAIL
