"""Readers for calls written as XML-like markup: `<tool_call>` and the other wrappers,
`<invoke name=…>` (Anthropic, MiniMax, DeepSeek-V3.2's DSML, Step-3's steptml), Anthropic's
legacy `<invoke><tool_name>…` form,
`<function=…>` (Llama 3.1, Qwen3-coder, Seed-OSS) and GLM's `<arg_key>`."""

from __future__ import annotations

import re
from dataclasses import replace

from thena_nb.core.rescue._blocks import (
    Block,
    Found,
    Pass,
    Span,
    blocks,
    first_json_object,
    mask,
    tag,
)
from thena_nb.core.rescue._json import (
    FAIL,
    Context,
    RawCall,
    calls_in_chunk,
    json_chunks,
    mentions,
)
from thena_nb.core.rescue._pythonic import looks_pythonic, parse_pythonic

__all__ = ["function_tags", "invokes", "json_found", "parse_body", "wrappers"]

# -- bodies: what sits inside a wrapper ---------------------------------------------------


def parse_body(text: str, body: Span, at_end: bool, ctx: Context) -> list[Found]:
    """The calls in the body of a wrapper, whatever format they are written in."""
    a, b = body
    chunk = text[a:b]
    if _INVOKE_OPEN.search(chunk) or _LEGACY_NAME.search(chunk):
        return invokes(chunk, ctx, base=a).found
    if _FUNC_OPEN.search(chunk):
        return function_tags(chunk, ctx, base=a).found
    if "<arg_key>" in chunk:
        return _glm(chunk, a)
    stripped = chunk.strip()
    if re.fullmatch(r"[A-Za-z_][\w.-]*", stripped):
        return [Found(a, 0, RawCall(stripped, None))]
    if looks_pythonic(stripped) and mentions(stripped, ctx.names):
        calls = parse_pythonic(stripped, ctx.budget) or []
        return [Found(a, k, c) for k, c in enumerate(calls)]
    return json_found(chunk, ctx, base=a, at_end=at_end).found


def chunk_calls(piece: str, ctx: Context, *, closing: bool = False) -> list[RawCall]:
    """The calls in one bracketed chunk: a pythonic list or JSON."""
    if looks_pythonic(piece):
        return (parse_pythonic(piece, ctx.budget) or []) if mentions(piece, ctx.names) else []
    return calls_in_chunk(piece, ctx, closing=closing)


def json_found(chunk: str, ctx: Context, *, base: int, at_end: bool) -> Pass:
    """Every call in the bracketed chunks of `chunk`, and the chunks that held them."""
    found = Pass()
    pieces, tails = json_chunks(chunk, at_end=at_end)
    for offset, tail in tails:
        calls = chunk_calls(tail, ctx, closing=True)
        if calls:
            pieces = [p for p in pieces if p[0] < offset]
            found.found.extend(Found(base + offset, k, c) for k, c in enumerate(calls))
            found.claimed.append((base + offset, base + offset + len(tail)))
            break
    for offset, piece in pieces:
        calls = chunk_calls(piece, ctx)
        found.found.extend(Found(base + offset, k, call) for k, call in enumerate(calls))
        if calls:
            found.claimed.append((base + offset, base + offset + len(piece)))
    return found


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


# -- wrappers ----------------------------------------------------------------------------------

_NEVER = re.compile(r"(?!)")
_WRAPPERS: list[tuple[re.Pattern[str], re.Pattern[str]]] = [
    *(tag(t) for t in ("function_calls", "tool_calls", "tool_call", "function_call", "TOOLCALL")),
    # Apertus
    (re.compile(r"<\|tools_prefix\|>"), re.compile(r"<\|tools_suffix\|>")),
    # Cohere Command R7B / A
    (re.compile(r"<\|START_ACTION\|>"), re.compile(r"<\|END_ACTION\|>")),
    # LFM2
    (re.compile(r"<\|tool_call_start\|>"), re.compile(r"<\|tool_call_end\|>")),
]


def wrappers(text: str, ctx: Context) -> Pass:
    """`<tool_call>…</tool_call>` and its relatives; a missing closing tag is tolerated,
    and a wrapper left open before the next one still holds its complete calls."""
    found = Pass()
    inner = replace(ctx, wrapped=True)
    for opener, closer in _WRAPPERS:
        spans = []
        for block in blocks(text, opener, closer):
            for f in parse_body(text, block.body, block.at_end, inner):
                found.found.append(Found(block.start, f.start * 1000 + f.order, f.call))
            spans.append((block.start, block.end))
        found.claimed.extend(spans)
        text = mask(text, spans)
    return found


# -- <invoke name=…> ----------------------------------------------------------------------------

_NS = r"(?:[A-Za-z][\w-]*:|[|｜]DSML[|｜])?"
_ATTRS = r"""(?:\s+[\w-]+\s*=\s*["'][^"'<>\n]*["'])*"""
_INVOKE_OPEN = re.compile(rf"""<{_NS}invoke\s+name\s*=\s*["']([^"'<>\n]*)["']{_ATTRS}\s*>""")
_INVOKE_CLOSE = re.compile(rf"</{_NS}invoke>")
_PARAM_OPEN = re.compile(
    rf"""<{_NS}parameter\s+name\s*=\s*["']([^"'<>\n]*)["'](?P<attrs>{_ATTRS})\s*>"""
)
_NOT_STRING = re.compile(r"""string\s*=\s*["']false["']""")
_PARAM_CLOSE = re.compile(rf"</{_NS}parameter>")


def invokes(text: str, ctx: Context, base: int = 0) -> Pass:
    """`<invoke name="N"><parameter name="k">v</parameter></invoke>`, alone or wrapped, in
    any namespace; an invoke may hold a JSON object instead of parameters. Also Anthropic's
    legacy form, `<invoke><tool_name>N</tool_name><parameters><k>v</k></parameters></invoke>`."""
    found = Pass()
    for block in blocks(text, _INVOKE_OPEN, _INVOKE_CLOSE):
        found.claimed.append((block.start, block.end))
        call = _invoke_call(text, block, ctx)
        if call is not None:
            found.found.append(Found(base + block.start, 0, call))
    if _LEGACY_NAME.search(text) is None:
        return found
    text = mask(text, found.claimed)
    for block in blocks(text, _LEGACY_OPEN, _INVOKE_CLOSE):
        found.claimed.append((block.start, block.end))
        call = _legacy_call(text, block, ctx)
        if call is not None:
            found.found.append(Found(base + block.start, 0, call))
    return found


def _invoke_call(text: str, block: Block, ctx: Context) -> RawCall | None:
    if not block.usable or not ctx.budget.candidate():
        return None
    name = block.name
    body = text[block.body_start : block.body_end]
    if not _PARAM_OPEN.search(body) and body.strip().startswith("{"):
        value = first_json_object(body, ctx.budget, at_end=block.at_end)
        return None if value is FAIL else RawCall(name, value)
    args = _xml_parameters(text, block, _PARAM_OPEN, _PARAM_CLOSE, strip=False)
    if args is None or (not args and not block.closed):
        return None  # cut off before any parameter: the arguments were still to come
    return RawCall(name, args, typed=True, json_keys=_json_keys(text, block))


# Anthropic's 2023-24 prompt format names the tool in a child element and writes each
# argument as an element named after it.
_LEGACY_OPEN = re.compile(rf"<{_NS}invoke\s*>")
_LEGACY_NAME = re.compile(rf"<{_NS}tool_name>")
_LEGACY_NAME_FULL = re.compile(rf"\s*<{_NS}tool_name>\s*([^<>\s]+)\s*</{_NS}tool_name>")
_LEGACY_PARAMS = re.compile(rf"<{_NS}parameters>")
_LEGACY_PARAMS_CLOSE = re.compile(rf"</{_NS}parameters>")
_ELEMENT_OPEN = re.compile(rf"<{_NS}([A-Za-z_][\w.-]*)>")


def _legacy_call(text: str, block: Block, ctx: Context) -> RawCall | None:
    """`<invoke>` + `<tool_name>N</tool_name>` + `<parameters><k>v</k>…</parameters>`.
    Values are raw text, typed by the schema; an element holding other elements is kept
    as text (and fails validation unless the tool takes text)."""
    if not block.usable or not ctx.budget.candidate():
        return None
    a, b = block.body
    m = _LEGACY_NAME_FULL.match(text, a, b)
    if m is None:
        return None
    name, pos = m.group(1), m.end()
    params = _LEGACY_PARAMS.search(text, pos, b)
    if params is None:
        return RawCall(name, None) if block.closed else None
    close = _LEGACY_PARAMS_CLOSE.search(text, params.end(), b)
    if close is None and not block.closed:
        return None  # cut off inside the parameters
    end = close.start() if close else b
    args: dict[str, str] = {}
    pos = params.end()
    while (m := _ELEMENT_OPEN.search(text, pos, end)) is not None:
        closing = "</" + m.group(0)[1:]
        closer = text.find(closing, m.end(), end)
        if closer < 0:
            return None
        args[m.group(1)] = text[m.end() : closer]
        pos = closer + len(closing)
    return RawCall(name, args, typed=True)


def _json_keys(text: str, block: Block) -> frozenset[str]:
    a, b = block.body
    return frozenset(
        m.group(1)
        for m in _PARAM_OPEN.finditer(text, a, b)
        if _NOT_STRING.search(m.group("attrs") or "")
    )


# -- <function=…> -------------------------------------------------------------------------------

_FUNC_OPEN = re.compile(
    r"""<function\s*=\s*["']?([\w.-]+)["']?\s*>|<function\s+name\s*=\s*["']([\w.-]+)["']\s*>"""
)
_FUNC_CLOSE = re.compile(r"</function>")
_QPARAM_OPEN = re.compile(r"""<parameter\s*=\s*["']?([\w.-]+)["']?\s*>""")


def function_tags(text: str, ctx: Context, base: int = 0) -> Pass:
    """Llama 3.1 `<function=N>{…}</function>` and Qwen3-coder
    `<function=N><parameter=k>v</parameter></function>`."""
    found = Pass()
    for block in blocks(text, _FUNC_OPEN, _FUNC_CLOSE):
        found.claimed.append((block.start, block.end))
        call = _function_call(text, block, ctx) if block.usable else None
        if call is not None:
            found.found.append(Found(base + block.start, 0, call))
    return found


def _function_call(text: str, block: Block, ctx: Context) -> RawCall | None:
    if not ctx.budget.candidate():
        return None
    name = block.name
    body = text[block.body_start : block.body_end]
    if _QPARAM_OPEN.search(body):
        args = _xml_parameters(text, block, _QPARAM_OPEN, _PARAM_CLOSE, strip=True)
        return None if args is None else RawCall(name, args, typed=True)
    if not body.strip():
        return RawCall(name, None) if block.closed else None
    value = first_json_object(body, ctx.budget, at_end=block.at_end)
    return None if value is FAIL else RawCall(name, value)


def _xml_parameters(
    text: str, call: Block, opener: re.Pattern[str], closer: re.Pattern[str], *, strip: bool
) -> dict[str, str] | None:
    """Parameter values as raw text; `None` if the call is malformed or cut off.

    A missing `</parameter>` is tolerated inside a closed call (the value ends at the next
    parameter); in a call cut off by the end of the text it means the value was cut too.
    With `strip`, the newline Qwen3-coder writes after the opening tag and before the
    closing one is markup; otherwise whitespace around a value is part of it.
    """
    if not call.usable:
        return None
    a, b = call.body
    args: dict[str, str] = {}
    for block in blocks(text[a:b], opener, closer):
        if not block.closed and not call.closed:
            return None
        value = text[a + block.body_start : a + block.body_end]
        args[block.name] = _strip_one_newline(value) if strip else value
    return args


def _strip_one_newline(value: str) -> str:
    value = value[1:] if value.startswith("\n") else value
    return value[:-1] if value.endswith("\n") else value
