"""The text formats of tool-call rescue, and the one registry that lists their readers.

`find_calls` runs the readers in `FORMATS` order, from the most to the least specific
marker. Each reader claims the spans it read, and claimed spans are blanked out before the
next reader runs, so a call inside `<tool_call>…</tool_call>` is not found a second time as
bare JSON. Blanking keeps every position, so calls come back in text order and the prose
before a call can be read where it stood.

Every reader is linear: markers are found with simple regexes, closing markers are looked
up by bisection in a list built once, and bracket matching is one pass per segment.

To read a new format, write its reader (a `Finder`: the prepared text and a `Context` in,
a `Pass` out) in the module of its kind and add it to `FORMATS` here.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from thena_nb.core.rescue._blocks import (
    Finder,
    Found,
    Span,
    fence_language,
    fences,
    inline_code,
    mask,
)
from thena_nb.core.rescue._json import Budget, Context
from thena_nb.core.rescue._markup import function_tags, invokes, wrappers
from thena_nb.core.rescue._text import bare, react, tool_code, transcript
from thena_nb.core.rescue._tokens import (
    functionary,
    gemma,
    harmony,
    mistral,
    python_tag,
    special_tokens,
)

__all__ = ["CALL_FENCES", "FORMATS", "Format", "find_calls", "prepare"]


@dataclass(frozen=True)
class Format:
    """One family of call formats and its reader."""

    name: str
    read: Finder


FORMATS: tuple[Format, ...] = (
    Format("harmony (gpt-oss)", harmony),
    Format("special tokens (DeepSeek, Kimi, Step-3)", special_tokens),
    Format("[TOOL_CALLS] (Mistral)", mistral),
    Format("call:NAME{…} (Gemma 4, FunctionGemma)", gemma),
    Format(">>>NAME (Functionary v3.2)", functionary),
    Format("<|python_tag|>NAME.call(…) (Llama 3.1 built-in tools)", python_tag),
    Format("wrapper tags (<tool_call>, DSML, Apertus, Cohere, LFM2, …)", wrappers),
    Format("<invoke name=…> and <invoke><tool_name> (Anthropic, MiniMax, DSML, steptml)", invokes),
    Format("<function=…> (Llama 3.1, Qwen3-coder, Seed-OSS)", function_tags),
    Format("[Calling tool: NAME with arguments: {…}] transcript lines", transcript),
    Format("ReAct Action:", react),
    Format("```tool_code fences", tool_code),
    Format("bare JSON and pythonic lists", bare),
)

# -- preparation: reasoning, quotes and unrelated code never hold calls ----------------------

_QUOTE_LINE = re.compile(r"(?m)^[ \t]*>[ \t].*$")
CALL_FENCES = frozenset({"", "json", "json5", "jsonc", "tool_call", "tool_code", "xml", "tool"})


def prepare(text: str, reasoning: Sequence[Span]) -> str:
    """Blank out reasoning, block quotes and fenced code in languages that are not calls."""
    spans = list(reasoning)
    spans += [m.span() for m in _QUOTE_LINE.finditer(text)]
    spans += [
        (start, end)
        for start, body, end in fences(text)
        if fence_language(text, start, body) not in CALL_FENCES
    ]
    return mask(text, spans)


def find_calls(
    text: str, names: frozenset[str], reasoning: Sequence[Span] = (), budget: Budget | None = None
) -> tuple[str, list[Found]]:
    """Every call-shaped piece of `text`, in text order, and the text with reasoning,
    quotes, foreign code and the calls themselves blanked out (for reading the prose)."""
    view = prepare(text, reasoning)
    ctx = Context(names, budget or Budget())
    found: list[Found] = []
    for fmt in FORMATS:
        result = fmt.read(view, ctx)
        found.extend(result.found)
        view = mask(view, result.claimed)
    found.sort(key=lambda f: (f.start, f.order))
    return view, _outside_inline_code(view, found)


def _outside_inline_code(view: str, found: list[Found]) -> list[Found]:
    """The calls that do not start inside inline code: `` `{"name": …}` `` in a sentence
    shows how a call is written, it does not make one. A reply that is nothing but one
    inline code span is a call formatted as code, and is kept."""
    if not found:
        return found
    spans = inline_code(view)
    if not spans:
        return found
    content = view.strip()
    spans = [(a, b) for a, b in spans if view[a:b] != content]
    starts = [a for a, _ in spans]
    kept: list[Found] = []
    for f in found:
        k = bisect_right(starts, f.start) - 1
        if k < 0 or f.start >= spans[k][1]:
            kept.append(f)
    return kept
