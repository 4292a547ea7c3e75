"""Reasoning written into a model's text: where it is, what it says, and the text without it.

Reasoning never holds calls (a draft in `<think>` is not an action) and is never part of
the answer. The markers read here:

- `<think>…</think>`, `<thinking>…</thinking>` (Qwen3, DeepSeek-R1, QwQ and most others),
  Magistral's `[THINK]…[/THINK]`, Seed-OSS's `<seed:think>…</seed:think>`;
- Gemma's `<|channel>thought…<channel|>`, Cohere's `<|START_THINKING|>…<|END_THINKING|>`,
  Apertus's `<|inner_prefix|>…<|inner_suffix|>`;
- the `analysis` channel of a harmony output (gpt-oss), whose answer is its `final`
  channel.

A block left open runs to the end of the text; a closing marker with no opening one before
it means the reply started inside its reasoning, which then runs from the start.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass, field

from thena_nb.core.rescue._harmony import Message, messages

__all__ = ["Reasoning", "find_reasoning", "split_reasoning"]

Span = tuple[int, int]

_PAIRS = [
    (re.compile(r"<think(?:ing)?>|\[THINK\]"), re.compile(r"</think(?:ing)?>|\[/THINK\]")),
    (re.compile(r"<seed:think>"), re.compile(r"</seed:think>")),
    (re.compile(r"<\|START_THINKING\|>"), re.compile(r"<\|END_THINKING\|>")),
    (re.compile(r"<\|inner_prefix\|>"), re.compile(r"<\|inner_suffix\|>")),
]
_GEMMA = (re.compile(r"<\|channel>"), re.compile(r"<channel\|>"))
_ANY_MARKER = re.compile(
    r"</?think|\[/?THINK\]|</?seed:think>|<\|channel>|<channel\|>|<\|(?:START|END)_THINKING\|>"
    r"|<\|inner_(?:prefix|suffix)\|>|<\|message\|>"
)
_GEMMA_LABEL = re.compile(r"\Athought[ \t]*\n")


@dataclass(frozen=True)
class Reasoning:
    """The reasoning found in a text."""

    spans: list[Span] = field(default_factory=list)
    """What to blank out before looking for calls: reasoning blocks, markers included."""
    parts: list[str] = field(default_factory=list)
    """The reasoning texts, in order."""
    text: str | None = None
    """The text without its reasoning; `None` when nothing was removed."""

    @property
    def reasoning(self) -> str | None:
        """The reasoning blocks joined by a blank line; `None` when there are none."""
        joined = "\n\n".join(p for p in self.parts if p)
        return joined or None


@dataclass(frozen=True)
class _Block:
    span: Span
    inner: Span
    label: bool = False
    """Gemma's thought channel starts with the word `thought` on its own line."""


def _pair_blocks(
    text: str, opener: re.Pattern[str], closer: re.Pattern[str], *, label: bool = False
) -> list[_Block]:
    closes = [(m.start(), m.end()) for m in closer.finditer(text)]
    close_starts = [c[0] for c in closes]
    found: list[_Block] = []
    pos = 0
    first_open: int | None = None
    for m in opener.finditer(text):
        first_open = m.start() if first_open is None else first_open
        if m.start() < pos:
            continue
        i = bisect_left(close_starts, m.end())
        if i < len(closes):
            found.append(_Block((m.start(), closes[i][1]), (m.end(), closes[i][0]), label))
            pos = closes[i][1]
        else:
            found.append(_Block((m.start(), len(text)), (m.end(), len(text)), label))
            pos = len(text)
    # A reply may start inside its reasoning and show only the closing marker.
    if closes and (first_open is None or closes[0][0] < first_open):
        found.insert(0, _Block((0, closes[0][1]), (0, closes[0][0]), label))
    return found


def _merged(found: list[_Block]) -> list[_Block]:
    """Blocks in text order, dropping any that starts inside an earlier one."""
    kept: list[_Block] = []
    end = -1
    for block in sorted(found, key=lambda b: b.span):
        if block.span[0] >= end:
            kept.append(block)
            end = block.span[1]
    return kept


def _harmony_text(text: str, msgs: list[Message]) -> str:
    """The answer of a harmony output: its `final` messages, else its preambles (commentary
    with no recipient)."""
    finals = [m for m in msgs if m.channel == "final" and not m.is_call]
    if not finals:
        finals = [m for m in msgs if m.channel not in ("analysis", "final") and m.recipient is None]
        finals = [m for m in finals if m.role in ("", "assistant")]
    return "\n".join(text[m.body[0] : m.body[1]].strip() for m in finals)


def _part(text: str, block: _Block) -> str:
    inner = text[block.inner[0] : block.inner[1]]
    return (_GEMMA_LABEL.sub("", inner) if block.label else inner).strip()


def find_reasoning(text: str) -> Reasoning:
    """The reasoning blocks of `text` and the text without them."""
    if _ANY_MARKER.search(text) is None:
        return Reasoning()
    found = [b for opener, closer in _PAIRS for b in _pair_blocks(text, opener, closer)]
    found += _pair_blocks(text, *_GEMMA, label=True)
    msgs = messages(text)
    for m in msgs:
        if m.channel == "analysis" and m.recipient is None:
            found.append(_Block((m.start, m.end), m.body))
    kept = _merged(found)
    if not kept and not msgs:
        return Reasoning()
    parts = [_part(text, b) for b in kept]
    if msgs:
        rest = _harmony_text(text, msgs)
    else:
        pieces, pos = [], 0
        for b in kept:
            pieces.append(text[pos : b.span[0]])
            pos = b.span[1]
        pieces.append(text[pos:])
        rest = "".join(pieces).strip()
    return Reasoning([b.span for b in kept], parts, rest)


def split_reasoning(text: str) -> tuple[str | None, str]:
    """Split a model's text into its reasoning and the rest, without looking for calls.

    Cheap on text with no reasoning markers: one regex search.

    Args:
        text: The model's text.

    Returns:
        The reasoning (blocks joined by a blank line), or `None` when there is none, and the
        text without it (`text` itself when nothing was removed).
    """
    if _ANY_MARKER.search(text) is None:  # the usual case, once per turn
        return None, text
    found = find_reasoning(text)
    return found.reasoning, text if found.text is None else found.text
