"""Readers for calls written in plain text conventions: ReAct `Action:` lines, transcript
lines (`[Calling tool: N with arguments: {…}]`), Gemini-style ```` ```tool_code ```` fences,
and bare JSON or pythonic lists anywhere in the text."""

from __future__ import annotations

import re
from dataclasses import replace

from thena_nb.core.rescue._blocks import Found, Pass, fence_language, fences, first_json
from thena_nb.core.rescue._json import (
    CAP,
    FAIL,
    Context,
    RawCall,
    call_shapes,
    decode_arguments,
    json_chunks,
    load_json,
    mentions,
)
from thena_nb.core.rescue._markup import json_found
from thena_nb.core.rescue._pythonic import parse_pythonic

__all__ = ["bare", "react", "tool_code", "transcript"]

_ACTION = re.compile(r"(?m)^[ \t]*(?:\*\*)?Action(?:\*\*)?[ \t]*:(?:\*\*)?[ \t]*")
_ACTION_INPUT = re.compile(r"\s*(?:\*\*)?Action[ \t]+[Ii]nput(?:\*\*)?[ \t]*:(?:\*\*)?[ \t]*")
# A tool name (any script), and LlamaIndex's tolerated note after it: `add (add two numbers)`.
_ACTION_NAME = re.compile(r"([^\W\d][\w.-]*)(?:[ \t]+\([^()\n]*\))?")
_REACT_STOP = re.compile(r"(?m)^[ \t]*(?:\*\*)?(?:Observation|Thought|Final Answer|Action[ \t]*:)")
_FINAL_ANSWER = re.compile(r"(?m)^[ \t]*(?:\*\*)?Final Answer")


def react(text: str, ctx: Context) -> Pass:
    """ReAct `Action: N` + `Action Input: …`, or `Action:` + a JSON blob or list.

    Only the first action counts: the rest of a trace with invented observations is the
    model talking to itself. A trace that also gives a final answer yields nothing.
    """
    first = _ACTION.search(text)
    if first is None or _FINAL_ANSWER.search(text):
        return Pass()
    stop = _REACT_STOP.search(text, first.end())
    end = stop.start() if stop else len(text)
    rest = text[first.end() : end]
    claimed = [(first.start(), end)]
    if rest.lstrip().startswith(("{", "[", "```")):
        value = first_json(rest, ctx.budget, at_end=end == len(text))
        calls = [] if value is FAIL else call_shapes(value, replace(ctx, wrapped=True)) or []
        return Pass([Found(first.start(), k, c) for k, c in enumerate(calls)], claimed)
    # The name may sit on the line after `Action:` (`Action:\nN\n\nAction Input:\n{…}`).
    at = first.end() + len(rest) - len(rest.lstrip())
    line = text[at:end].partition("\n")[0]
    named = _ACTION_NAME.fullmatch(line.strip().strip("`*\"'"))
    if named is None:
        return Pass()
    name = named.group(1)
    inp = _ACTION_INPUT.match(text, at + len(line))
    if inp is None:
        return Pass([Found(first.start(), 0, RawCall(name, None))], claimed)
    stop = _REACT_STOP.search(text, inp.end())
    end = stop.start() if stop else len(text)
    call = _react_input(name, text[inp.end() : end], ctx, at_end=end == len(text))
    return Pass([] if call is None else [Found(first.start(), 0, call)], [(first.start(), end)])


def _react_input(name: str, raw: str, ctx: Context, *, at_end: bool) -> RawCall | None:
    value = raw.strip()
    if value.startswith(("{", "```")):
        args = first_json(value, ctx.budget, at_end=at_end)
        return RawCall(name, args) if isinstance(args, dict) else None
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    arguments = decode_arguments(value, ctx.budget) if value else None
    return None if arguments is FAIL else RawCall(name, arguments, typed=True)


_TRANSCRIPT = re.compile(
    r"\[[ \t]*Calling[ \t]+tool[ \t]*:?[ \t]*`?([^\W\d][\w.-]*)`?[ \t]+with[ \t]+"
    r"(?:arguments|args|input|parameters)[ \t]*:?[ \t]*(?=\{)",
    re.IGNORECASE,
)
_TRANSCRIPT_END = re.compile(r"[ \t]*\]")


def transcript(text: str, ctx: Context) -> Pass:
    """Transcript lines imitating an agent log: `[Calling tool: N with arguments: {…}]`.

    The JSON object must be complete and the bracket closed (or the text end right after
    the object); a line naming a tool without arguments is a status line, not a call.
    """
    found = Pass()
    if "alling" not in text and "ALLING" not in text:
        return found
    matches = list(_TRANSCRIPT.finditer(text))
    for k, m in enumerate(matches):
        # Each line is read up to the next one, so the scan stays linear.
        limit = matches[k + 1].start() if k + 1 < len(matches) else len(text)
        if not ctx.budget.candidate():
            break
        pieces, _ = json_chunks(text[m.end() : min(limit, m.end() + CAP)], at_end=False)
        if not pieces or pieces[0][0] != 0:
            continue
        end = m.end() + len(pieces[0][1])
        close = _TRANSCRIPT_END.match(text, end)
        if close is None and text[end:].strip():
            continue
        end = close.end() if close else end
        value = load_json(pieces[0][1], budget=ctx.budget)
        found.claimed.append((m.start(), end))
        if isinstance(value, dict):
            found.found.append(Found(m.start(), 0, RawCall(m.group(1), value)))
    return found


def tool_code(text: str, ctx: Context) -> Pass:
    """```` ```tool_code ```` fences holding `print(default_api.f(...))` or plain calls."""
    found = Pass()
    for start, body, end in fences(text):
        if fence_language(text, start, body) != "tool_code":
            continue
        found.claimed.append((start, end))
        src = text[body:end].rstrip().rstrip("`~")
        if any(n in src for n in ctx.names):
            calls = parse_pythonic(src, ctx.budget) or []
            found.found.extend(Found(start, k, call) for k, call in enumerate(calls))
    return found


_LEAD_FENCE = re.compile(r"(?:```|~~~)[\w.+-]*[ \t]*\n\s*")


def _content_bounds(text: str) -> tuple[int, int]:
    """Where the reply's content starts and ends, past surrounding blanks and one fence."""
    first = len(text) - len(text.lstrip())
    if m := _LEAD_FENCE.match(text, first):
        first = m.end()
    trimmed = text.rstrip()
    if trimmed.endswith(("```", "~~~")) and first > len(text) - len(text.lstrip()):
        trimmed = trimmed[:-3].rstrip()
    return first, max(first, len(trimmed))


def bare(text: str, ctx: Context) -> Pass:
    """Bare JSON objects and lists, ```json fences, and pythonic `[f(a=1), …]` lists.

    When the whole reply is one JSON value, Apertus's `{"N": {…}}` also counts.
    """
    first, last = _content_bounds(text)
    if last > first and text[first] in "{[" and text[last - 1] in "}]":
        calls = _alone_calls(text[first:last], ctx)
        if calls:
            return Pass([Found(first, k, c) for k, c in enumerate(calls)], [(first, last)])
    return json_found(text, ctx, base=0, at_end=True)


def _alone_calls(content: str, ctx: Context) -> list[RawCall]:
    """The calls of a reply that is one JSON value, read with the shapes only such a reply
    may take; `[]` unless the whole content loads as one value."""
    if not mentions(content, ctx.names) or not ctx.budget.candidate():
        return []
    value = load_json(content, budget=ctx.budget)
    return [] if value is FAIL else call_shapes(value, replace(ctx, alone=True)) or []
