"""The text formats of tool-call rescue: where calls sit in a model's text.

`find_calls` runs the finders from the most to the least specific marker. Each finder
claims the spans it read, and claimed spans are blanked out before the next finder runs, so
a call inside `<tool_call>…</tool_call>` is not found a second time as bare JSON. Blanking
keeps every position, so calls come back in text order and the prose before a call can be
read where it stood.

Every finder is linear: markers are found with simple regexes, closing markers are looked
up by bisection in a list built once, and bracket matching is one pass per segment.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from thena_nb.core.rescue._json import (
    FAIL,
    RawCall,
    call_shapes,
    calls_in_chunk,
    decode_arguments,
    json_chunks,
    load_json,
    mentions,
    parse_pythonic,
)

Span = tuple[int, int]


@dataclass(frozen=True)
class Found:
    """A call found in the text, at `start` (and `order` among calls sharing a start)."""

    start: int
    order: int
    call: RawCall


@dataclass
class _Pass:
    """What one finder returns: the calls it found and the spans it read."""

    found: list[Found]
    claimed: list[Span]


Finder = Callable[[str, frozenset[str]], _Pass]

# -- preparation: reasoning, quotes and unrelated code never hold calls ------------------

_THINK_OPEN = re.compile(r"<think(?:ing)?>|\[THINK\]")
_THINK_CLOSE = re.compile(r"</think(?:ing)?>|\[/THINK\]")
_QUOTE_LINE = re.compile(r"(?m)^[ \t]*>[ \t].*$")
_FENCE = re.compile(r"(?m)^[ \t]*(```+|~~~+)[ \t]*([\w+.-]*)[^\n]*$")
CALL_FENCES = frozenset({"", "json", "json5", "jsonc", "tool_call", "tool_code", "xml", "tool"})


def prepare(text: str) -> str:
    """Blank out reasoning, block quotes and fenced code in languages that are not calls."""
    spans = _think_spans(text)
    spans += [m.span() for m in _QUOTE_LINE.finditer(text)]
    spans += _foreign_fences(text)
    return mask(text, spans)


def _think_spans(text: str) -> list[Span]:
    spans: list[Span] = []
    closes = [m.end() for m in _THINK_CLOSE.finditer(text)]
    pos = 0
    for m in _THINK_OPEN.finditer(text):
        if m.start() < pos:
            continue
        i = bisect_left(closes, m.end())
        end = closes[i] if i < len(closes) else len(text)
        spans.append((m.start(), end))
        pos = end
    # A reply may start inside its reasoning and show only the closing tag.
    first_open = next(iter(_THINK_OPEN.finditer(text)), None)
    if closes and (first_open is None or closes[0] <= first_open.start()):
        spans.append((0, closes[0]))
    return spans


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


def _foreign_fences(text: str) -> list[Span]:
    spans: list[Span] = []
    for start, body, end in fences(text):
        language = text[start:body].strip().strip("`~").strip().split(" ")[0].lower()
        if language not in CALL_FENCES:
            spans.append((start, end))
    return spans


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
        parts.append(re.sub(r"[^\n]", " ", text[a:b]))
        pos = b
    parts.append(text[pos:])
    return "".join(parts)


# -- blocks between an opening and a closing marker -------------------------------------


@dataclass(frozen=True)
class _Block:
    start: int
    body: Span
    end: int
    closed: bool
    """The closing marker was found."""
    at_end: bool
    """The closing marker is missing and the block runs to the end of the text."""
    opener: re.Match[str]

    @property
    def usable(self) -> bool:
        """Closed, or cut only by the end of the text; a block that runs into the next
        opener without closing is malformed and holds no call."""
        return self.closed or self.at_end


def _blocks(text: str, opener: re.Pattern[str], closer: re.Pattern[str]) -> list[_Block]:
    """Blocks from each opener to its closer; a block with no closer stops at the next
    opener or at the end of the text."""
    closes = [(m.start(), m.end()) for m in closer.finditer(text)]
    close_starts = [c[0] for c in closes]
    opens = list(opener.finditer(text))
    blocks: list[_Block] = []
    pos = 0
    for k, m in enumerate(opens):
        if m.start() < pos:
            continue
        limit = opens[k + 1].start() if k + 1 < len(opens) else len(text)
        i = bisect_left(close_starts, m.end())
        if i < len(closes) and closes[i][0] < limit:
            block = _Block(m.start(), (m.end(), closes[i][0]), closes[i][1], True, False, m)
        else:
            block = _Block(m.start(), (m.end(), limit), limit, False, limit == len(text), m)
        blocks.append(block)
        pos = block.end
    return blocks


def _tag(name: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    ns = r"(?:[A-Za-z][\w-]*:)?"
    return re.compile(rf"<{ns}{name}>"), re.compile(rf"</{ns}{name}>")


# -- bodies: what sits inside a wrapper tag ---------------------------------------------


def parse_body(text: str, body: Span, at_end: bool, names: frozenset[str]) -> list[Found]:
    """The calls in the body of a wrapper tag, whatever format they are written in."""
    a, b = body
    chunk = text[a:b]
    if _INVOKE_OPEN.search(chunk):
        return _invokes(chunk, names, base=a).found
    if _FUNC_OPEN.search(chunk):
        return _function_tags(chunk, names, base=a).found
    if "<arg_key>" in chunk:
        return _glm(chunk, a)
    stripped = chunk.strip()
    if re.fullmatch(r"[A-Za-z_][\w.-]*", stripped):
        return [Found(a, 0, RawCall(stripped, None))]
    if re.match(r"[A-Za-z_][\w.]*\s*\(", stripped) and mentions(stripped, names):
        calls = parse_pythonic(stripped) or []
        return [Found(a, k, c) for k, c in enumerate(calls)]
    return _json_found(chunk, names, base=a, at_end=at_end).found


def _json_found(chunk: str, names: frozenset[str], *, base: int, at_end: bool) -> _Pass:
    found: list[Found] = []
    claimed: list[Span] = []
    pieces, tail = json_chunks(chunk, at_end=at_end)
    if tail is not None:
        calls = calls_in_chunk(tail[1], names)
        if calls:
            pieces = [p for p in pieces if p[0] < tail[0]] + [tail]
    for offset, piece in pieces:
        calls = calls_in_chunk(piece, names)
        found.extend(Found(base + offset, k, call) for k, call in enumerate(calls))
        if calls:
            claimed.append((base + offset, base + offset + len(piece)))
    return _Pass(found, claimed)


def _first_json_object(chunk: str, *, at_end: bool) -> object:
    """The JSON object `chunk` starts with (after whitespace or a fence), else `FAIL`."""
    stripped = chunk.lstrip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        stripped = stripped.rsplit("```", 1)[0] if "```" in stripped else stripped
    stripped = stripped.strip()
    if not stripped.startswith("{"):
        return FAIL
    pieces, tail = json_chunks(stripped, at_end=at_end)
    piece = tail if tail is not None and tail[0] == 0 else (pieces[0] if pieces else None)
    if piece is None or piece[0] != 0:
        return FAIL
    value = load_json(piece[1])
    return value if isinstance(value, dict) else FAIL


def _glm(chunk: str, base: int) -> list[Found]:
    name = chunk[: chunk.find("<arg_key>")].strip()
    args: dict[str, str] = {}
    pos = 0
    while True:
        i = chunk.find("<arg_key>", pos)
        j = chunk.find("</arg_key>", i)
        k = chunk.find("<arg_value>", j)
        e = chunk.find("</arg_value>", k)
        if min(i, j, k, e) < 0:
            break
        args[chunk[i + 9 : j].strip()] = chunk[k + 11 : e]
        pos = e
    return [Found(base, 0, RawCall(name, args, typed=True))] if name else []


# -- finders ----------------------------------------------------------------------------

_SPECIAL = r"[▁_ \\]{0,2}"
_SPECIAL_BEGIN = re.compile(rf"<[|｜]tool{_SPECIAL}call{_SPECIAL}begin[|｜]>")
_SPECIAL_END = re.compile(rf"<[|｜]tool{_SPECIAL}call{_SPECIAL}end[|｜]>")
_SPECIAL_SECTION = re.compile(
    rf"<[|｜]tool{_SPECIAL}calls{_SPECIAL}(?:section{_SPECIAL})?(?:begin|end)?[|｜]>"
)
_SPECIAL_SEP = re.compile(rf"<[|｜]tool{_SPECIAL}sep[|｜]>")
_KIMI_ARGS = re.compile(rf"<[|｜]tool{_SPECIAL}call{_SPECIAL}argument{_SPECIAL}begin[|｜]>")


def _special_tokens(text: str, names: frozenset[str]) -> _Pass:
    """DeepSeek (`<｜tool▁call▁begin｜>…<｜tool▁sep｜>…`) and Kimi
    (`<|tool_call_begin|>functions.N:0<|tool_call_argument_begin|>{…}`) special tokens."""
    found: list[Found] = []
    claimed = [m.span() for m in _SPECIAL_SECTION.finditer(text)]
    for block in _blocks(text, _SPECIAL_BEGIN, _SPECIAL_END):
        claimed.append((block.start, block.end))
        body = text[block.body[0] : block.body[1]]
        if not block.usable:
            continue
        if m := _KIMI_ARGS.search(body):
            name = re.sub(r":\d+\s*$", "", body[: m.start()].strip())
            rest = body[m.end() :]
        elif m := _SPECIAL_SEP.search(body):
            head, rest = body[: m.start()].strip(), body[m.end() :]
            if head in ("", "function"):
                name, _, rest = rest.lstrip().partition("\n")
                name = name.strip()
            else:
                name = head
        else:
            continue
        args = _first_json_object(rest, at_end=block.at_end)
        if args is not FAIL:
            found.append(Found(block.start, 0, RawCall(name, args)))
    return _Pass(found, claimed)


_MISTRAL = re.compile(r"\[TOOL_CALLS\]")
_MISTRAL_NAME = re.compile(
    r"\s*([A-Za-z_][\w.-]*)\s*(?:\[CALL_ID\]\s*\w+\s*)?(?:\[ARGS\])?\s*(?:\[CALL_ID\]\s*\w+\s*)?"
)


def _mistral(text: str, names: frozenset[str]) -> _Pass:
    """`[TOOL_CALLS] [{…}]` (older Mistral) and `[TOOL_CALLS]name[ARGS]{…}` (newer)."""
    found: list[Found] = []
    claimed: list[Span] = []
    marks = list(_MISTRAL.finditer(text))
    for k, m in enumerate(marks):
        limit = marks[k + 1].start() if k + 1 < len(marks) else len(text)
        segment = text[m.end() : limit]
        at_end = limit == len(text)
        claimed.append(m.span())
        if segment.lstrip().startswith(("[", "{")):
            continue  # plain JSON after the marker: the JSON finder reads it
        named = _MISTRAL_NAME.match(segment)
        if named is None:
            continue
        args = _first_json_object(segment[named.end() :], at_end=at_end)
        if args is not FAIL:
            found.append(Found(m.start(), 0, RawCall(named.group(1), args)))
            claimed.append((m.start(), limit))
    return _Pass(found, claimed)


_WRAPPERS = [
    _tag(t) for t in ("function_calls", "tool_calls", "tool_call", "function_call", "TOOLCALL")
]


def _wrappers(text: str, names: frozenset[str]) -> _Pass:
    """`<tool_call>…</tool_call>` and its relatives; a missing closing tag is tolerated."""
    found: list[Found] = []
    claimed: list[Span] = []
    for opener, closer in _WRAPPERS:
        blocks = _blocks(text, opener, closer)
        for block in (b for b in blocks if b.usable):
            for f in parse_body(text, block.body, block.at_end, names):
                found.append(Found(block.start, f.start * 1000 + f.order, f.call))
        spans = [(block.start, block.end) for block in blocks]
        claimed.extend(spans)
        text = mask(text, spans)
    return _Pass(found, claimed)


_INVOKE_OPEN = re.compile(r"""<(?:[A-Za-z][\w-]*:)?invoke\s+name\s*=\s*["']([^"'<>\n]*)["']\s*>""")
_INVOKE_CLOSE = re.compile(r"</(?:[A-Za-z][\w-]*:)?invoke>")
_PARAM_OPEN = re.compile(
    r"""<(?:[A-Za-z][\w-]*:)?parameter\s+name\s*=\s*["']([^"'<>\n]*)["']\s*>"""
)
_PARAM_CLOSE = re.compile(r"</(?:[A-Za-z][\w-]*:)?parameter>")


def _invokes(text: str, names: frozenset[str], base: int = 0) -> _Pass:
    """`<invoke name="N"><parameter name="k">v</parameter></invoke>`, alone or wrapped."""
    found: list[Found] = []
    claimed: list[Span] = []
    for block in _blocks(text, _INVOKE_OPEN, _INVOKE_CLOSE):
        claimed.append((block.start, block.end))
        args = _xml_parameters(text, block, _PARAM_OPEN, _PARAM_CLOSE)
        if args is not None:
            call = RawCall(block.opener.group(1), args, typed=True)
            found.append(Found(base + block.start, 0, call))
    return _Pass(found, claimed)


_FUNC_OPEN = re.compile(
    r"""<function\s*=\s*["']?([\w.-]+)["']?\s*>|<function\s+name\s*=\s*["']([\w.-]+)["']\s*>"""
)
_FUNC_CLOSE = re.compile(r"</function>")
_QPARAM_OPEN = re.compile(r"""<parameter\s*=\s*["']?([\w.-]+)["']?\s*>""")


def _function_tags(text: str, names: frozenset[str], base: int = 0) -> _Pass:
    """Llama 3.1 `<function=N>{…}</function>` and Qwen3-coder
    `<function=N><parameter=k>v</parameter></function>`."""
    found: list[Found] = []
    claimed: list[Span] = []
    for block in _blocks(text, _FUNC_OPEN, _FUNC_CLOSE):
        claimed.append((block.start, block.end))
        if not block.usable:
            continue
        name = block.opener.group(1) or block.opener.group(2)
        body = text[block.body[0] : block.body[1]]
        call: RawCall | None = None
        if _QPARAM_OPEN.search(body):
            args = _xml_parameters(text, block, _QPARAM_OPEN, _PARAM_CLOSE)
            call = None if args is None else RawCall(name, args, typed=True)
        elif not body.strip():
            call = RawCall(name, None)
        elif (value := _first_json_object(body, at_end=block.at_end)) is not FAIL:
            call = RawCall(name, value)
        if call is not None:
            found.append(Found(base + block.start, 0, call))
    return _Pass(found, claimed)


def _xml_parameters(
    text: str, call: _Block, opener: re.Pattern[str], closer: re.Pattern[str]
) -> dict[str, str] | None:
    """Parameter values as raw text; `None` if the call is malformed or cut off.

    A missing `</parameter>` is tolerated inside a closed call (the value ends at the next
    parameter); in a call cut off by the end of the text it means the value was cut too.
    """
    if not call.usable:
        return None
    a, b = call.body
    args: dict[str, str] = {}
    for block in _blocks(text[a:b], opener, closer):
        if not block.closed and not call.closed:
            return None
        value = text[a + block.body[0] : a + block.body[1]]
        args[block.opener.group(1)] = _strip_one_newline(value)
    return args


def _strip_one_newline(value: str) -> str:
    value = value[1:] if value.startswith("\n") else value
    return value[:-1] if value.endswith("\n") else value


_ACTION = re.compile(r"(?m)^[ \t]*(?:\*\*)?Action(?:\*\*)?[ \t]*:(?:\*\*)?[ \t]*")
_ACTION_INPUT = re.compile(r"\s*(?:\*\*)?Action[ \t]+Input(?:\*\*)?[ \t]*:(?:\*\*)?[ \t]*")
_REACT_STOP = re.compile(r"(?m)^[ \t]*(?:\*\*)?(?:Observation|Thought|Final Answer|Action[ \t]*:)")
_FINAL_ANSWER = re.compile(r"(?m)^[ \t]*(?:\*\*)?Final Answer")


def _react(text: str, names: frozenset[str]) -> _Pass:
    """ReAct `Action: N` + `Action Input: …`, or `Action:` + a JSON blob.

    Only the first action counts: the rest of a trace with invented observations is the
    model talking to itself. A trace that also gives a final answer yields nothing.
    """
    first = _ACTION.search(text)
    if first is None or _FINAL_ANSWER.search(text):
        return _Pass([], [])
    stop = _REACT_STOP.search(text, first.end())
    end = stop.start() if stop else len(text)
    rest = text[first.end() : end]
    at_end = end == len(text)
    if rest.lstrip().startswith(("{", "```")):
        value = _first_json_object(rest, at_end=at_end)
        calls = [] if value is FAIL else call_shapes(value) or []
        found = [Found(first.start(), k, c) for k, c in enumerate(calls)]
        return _Pass(found, [(first.start(), end)])
    line = rest.partition("\n")[0]
    name = line.strip().strip("`*\"'")
    if not re.fullmatch(r"[A-Za-z_][\w.-]*", name):
        return _Pass([], [])
    inp = _ACTION_INPUT.match(text, first.end() + len(line))
    if inp is None:
        return _Pass([Found(first.start(), 0, RawCall(name, None))], [(first.start(), end)])
    stop = _REACT_STOP.search(text, inp.end())
    end = stop.start() if stop else len(text)
    call = _react_input(name, text[inp.end() : end], at_end=end == len(text))
    found = [] if call is None else [Found(first.start(), 0, call)]
    return _Pass(found, [(first.start(), end)])


def _react_input(name: str, raw: str, *, at_end: bool) -> RawCall | None:
    value = raw.strip()
    if value.startswith(("{", "```")):
        args = _first_json_object(value, at_end=at_end)
        return None if args is FAIL else RawCall(name, args)
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    arguments = decode_arguments(value) if value else None
    return None if arguments is FAIL else RawCall(name, arguments, typed=True)


def _tool_code(text: str, names: frozenset[str]) -> _Pass:
    """```` ```tool_code ```` fences holding `print(default_api.f(...))` or plain calls."""
    found: list[Found] = []
    claimed: list[Span] = []
    for start, body, end in fences(text):
        if text[start:body].strip().strip("`~").strip().lower() != "tool_code":
            continue
        claimed.append((start, end))
        src = text[body:end].rstrip().rstrip("`~")
        if mentions(src, names):
            calls = parse_pythonic(src) or []
            found.extend(Found(start, k, call) for k, call in enumerate(calls))
    return _Pass(found, claimed)


def _bare(text: str, names: frozenset[str]) -> _Pass:
    """Bare JSON objects and lists, ```json fences, and pythonic `[f(a=1), …]` lists."""
    return _json_found(text, names, base=0, at_end=True)


FINDERS: tuple[Finder, ...] = (
    _special_tokens,
    _mistral,
    _wrappers,
    _invokes,
    _function_tags,
    _react,
    _tool_code,
    _bare,
)


def find_calls(text: str, names: frozenset[str]) -> tuple[str, list[Found]]:
    """Every call-shaped piece of `text`, in text order, and the text with reasoning,
    quotes, foreign code and the calls themselves blanked out (for reading the prose)."""
    view = prepare(text)
    found: list[Found] = []
    for finder in FINDERS:
        result = finder(view, names)
        found.extend(result.found)
        view = mask(view, result.claimed)
    found.sort(key=lambda f: (f.start, f.order))
    return view, found
