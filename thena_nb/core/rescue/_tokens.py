"""Readers for calls written with a model family's special tokens: harmony (gpt-oss),
DeepSeek, Kimi and Step-3 `<｜tool_call_begin｜>` blocks, Mistral's `[TOOL_CALLS]`, Gemma 4
and FunctionGemma `call:NAME{…}`, Functionary's `>>>NAME`, and Llama 3.1's
`<|python_tag|>NAME.call(…)`."""

from __future__ import annotations

import re

from thena_nb.core.rescue._blocks import Found, Pass, blocks, first_json_object
from thena_nb.core.rescue._harmony import Message, messages
from thena_nb.core.rescue._json import CAP, FAIL, Context, RawCall, load_json
from thena_nb.core.rescue._lenient import FUNCTION_GEMMA, GEMMA, read_prefix
from thena_nb.core.rescue._markup import invokes
from thena_nb.core.rescue._pythonic import parse_pythonic

__all__ = ["functionary", "gemma", "harmony", "mistral", "python_tag", "special_tokens"]

# -- harmony -------------------------------------------------------------------------------


def harmony(text: str, ctx: Context) -> Pass:
    """gpt-oss harmony messages addressed to a tool: `<|channel|>commentary to=functions.N
    <|constrain|>json<|message|>{…}<|call|>`, the recipient also in the role part."""
    msgs = messages(text)
    found = Pass(claimed=[(m.start, m.end) for m in msgs])
    for m in msgs:
        call = _harmony_call(text, m, ctx) if m.is_call and ctx.budget.candidate() else None
        if call is not None:
            found.found.append(Found(m.start, 0, call))
    return found


def _harmony_call(text: str, m: Message, ctx: Context) -> RawCall | None:
    assert m.recipient is not None
    body = text[m.body[0] : m.body[1]].strip()
    if not body:
        return RawCall(m.recipient, None) if m.ended else None
    if body.startswith(("{", "[")):
        value = load_json(body, closing=not m.ended, budget=ctx.budget)
        return RawCall(m.recipient, value) if isinstance(value, dict) else None
    # Content that is not JSON (`<|constrain|>code`, a plain query) is the tool's one input.
    return RawCall(m.recipient, body)


# -- DeepSeek, Kimi, Step-3 -------------------------------------------------------------------

_S = r"[▁_ \\]{0,2}"
_SEP = rf"<[|｜]tool{_S}sep[|｜]>"
_BEGIN = re.compile(
    rf"<[|｜]tool{_S}call{_S}begin[|｜]>"
    # DeepSeek-R1 may open with the section token alone: `<｜tool▁calls｜>function<｜tool▁sep｜>`.
    rf"|<[|｜]tool{_S}calls[|｜]>(?=[\w.\s-]{{0,80}}{_SEP})"
)
_END = re.compile(rf"<[|｜]tool{_S}call{_S}end[|｜]>")
_SECTION = re.compile(rf"<[|｜]tool{_S}calls{_S}(?:section{_S})?(?:begin|end)?[|｜]>")
_SEP_RE = re.compile(_SEP)
_KIMI_ARGS = re.compile(rf"<[|｜]tool{_S}call{_S}argument{_S}begin[|｜]>")


def special_tokens(text: str, ctx: Context) -> Pass:
    """DeepSeek (`<｜tool▁call▁begin｜>function<｜tool▁sep｜>N …`), Kimi
    (`<|tool_call_begin|>functions.N:0<|tool_call_argument_begin|>{…}`) and Step-3
    (`<｜tool_call_begin｜><steptml:invoke name="N">…`) special tokens."""
    found = Pass(claimed=[m.span() for m in _SECTION.finditer(text)])
    for block in blocks(text, _BEGIN, _END):
        found.claimed.append((block.start, block.end))
        if not block.usable:
            continue
        a, b = block.body
        body = text[a:b]
        if "invoke" in body:
            inner = invokes(body, ctx, base=a).found
            if inner:
                found.found.extend(Found(block.start, k, f.call) for k, f in enumerate(inner))
                continue
        call = _special_call(body, ctx, at_end=block.at_end)
        if call is not None:
            found.found.append(Found(block.start, 0, call))
    return found


def _special_call(body: str, ctx: Context, *, at_end: bool) -> RawCall | None:
    if m := _KIMI_ARGS.search(body):
        name = re.sub(r":\d+\s*$", "", body[: m.start()].strip())
        rest = body[m.end() :]
    elif m := _SEP_RE.search(body):
        head, rest = body[: m.start()].strip(), body[m.end() :]
        if head in ("", "function"):
            name, _, rest = rest.lstrip().partition("\n")
            name = name.strip()
        else:
            name = head
    else:
        return None
    args = first_json_object(rest, ctx.budget, at_end=at_end)
    return None if args is FAIL else RawCall(name, args)


# -- Mistral ----------------------------------------------------------------------------------

_MISTRAL = re.compile(r"\[TOOL_CALLS\]")
_MISTRAL_NAME = re.compile(
    r"\s*([A-Za-z_][\w.-]*)\s*(?:\[CALL_ID\]\s*\w+\s*)?(?:\[ARGS\])?\s*(?:\[CALL_ID\]\s*\w+\s*)?"
)


def mistral(text: str, ctx: Context) -> Pass:
    """`[TOOL_CALLS] [{…}]` (older Mistral) and `[TOOL_CALLS]name[ARGS]{…}` (newer)."""
    found = Pass()
    marks = [m.span() for m in _MISTRAL.finditer(text)]
    for k, (start, end) in enumerate(marks):
        limit = marks[k + 1][0] if k + 1 < len(marks) else len(text)
        found.claimed.append((start, end))
        named = _MISTRAL_NAME.match(text, end, limit)
        if named is None:
            continue  # plain JSON after the marker (or nothing): the JSON reader reads it
        args = first_json_object(text[named.end() : limit], ctx.budget, at_end=limit == len(text))
        if args is not FAIL:
            found.found.append(Found(start, 0, RawCall(named.group(1), args)))
            found.claimed.append((start, limit))
    return found


# -- Gemma 4 and FunctionGemma ---------------------------------------------------------------

_GEMMA_OPEN = re.compile(
    r"<\|tool_call>:?\s*call:(?P<a>[\w.-]+)(?=\{)"
    r"|<start_function_call>\s*call:(?P<f>[\w.-]+)(?=\{)"
    r"|<call>(?P<b>[\w.-]+)(?=\{)"
    # Gemma 4 may drop `<|tool_call>` and write the call at the start of a line.
    r"|(?m:^)[ \t]*call:(?P<c>[\w.-]+)(?=\{)"
)
_GEMMA_CLOSE = re.compile(r"\s*(?:<tool_call\|>|<turn\|>|<end_function_call>)")


def gemma(text: str, ctx: Context) -> Pass:
    """Gemma 4 `<|tool_call>call:N{key:<|"|>text<|"|>,n:42}<tool_call|>` and FunctionGemma
    `<start_function_call>call:N{key:<escape>text<escape>}<end_function_call>`."""
    found = Pass()
    opens = [
        (m.start(), m.end(), m.lastgroup, m.group(m.lastgroup or 0))
        for m in _GEMMA_OPEN.finditer(text)
    ]
    for k, (start, name_end, group, name) in enumerate(opens):
        limit = opens[k + 1][0] if k + 1 < len(opens) else len(text)
        # Each call is read within its own stretch of text, so a value that never ends
        # costs one read, not one per later call.
        stretch = text[name_end : min(limit, name_end + CAP)]
        if not ctx.budget.candidate() or not ctx.budget.slow(len(stretch)):
            break
        value, used = read_prefix(stretch, FUNCTION_GEMMA if group == "f" else GEMMA)
        end = name_end + used
        if isinstance(value, dict):
            close = _GEMMA_CLOSE.match(text, end)
            end = close.end() if close else end
            found.found.append(Found(start, 0, RawCall(name, value)))
        found.claimed.append((start, max(end, name_end)))
    return found


# -- Functionary v3.2 -------------------------------------------------------------------------

_FUNCTIONARY = re.compile(r">>>[ \t]*([\w.-]+)[ \t]*\n")
_FUNCTIONARY_START = re.compile(r"\s*([\w.-]+)[ \t]*\n(?=\s*\{)")


def functionary(text: str, ctx: Context) -> Pass:
    """Functionary v3.2 `>>>N\\n{…}` (also right after text), `>>>all\\n` for plain text,
    and the first call with its `>>>` still in the prompt (`N\\n{…}` opening the reply)."""
    found = Pass()
    marks = list(_FUNCTIONARY.finditer(text))
    starts = [(m.start(), m.group(1), m.end()) for m in marks]
    first = _FUNCTIONARY_START.match(text)
    if first is not None and first.group(1) in ctx.names and not text.startswith(">>>"):
        starts.insert(0, (first.start(1), first.group(1), first.end()))
    for k, (start, name, body) in enumerate(starts):
        limit = starts[k + 1][0] if k + 1 < len(starts) else len(text)
        found.claimed.append((start, body))
        if name == "all":
            continue
        args = first_json_object(text[body:limit], ctx.budget, at_end=limit == len(text))
        if args is not FAIL:
            found.found.append(Found(start, 0, RawCall(name, args)))
            found.claimed.append((start, limit))
    return found


# -- Llama 3.1 built-in tools -----------------------------------------------------------------

_PYTHON_TAG = re.compile(r"<\|python_tag\|>")
_PYTHON_END = re.compile(r"<\|eom_id\|>|<\|eot_id\|>|<\|python_tag\|>")
_BUILTIN_CALL = re.compile(r"\s*[A-Za-z_][\w.]*\s*\(")


def python_tag(text: str, ctx: Context) -> Pass:
    """Llama 3.1 built-in tools after `<|python_tag|>`: `brave_search.call(query="…")`;
    JSON after the tag is left to the JSON reader."""
    found = Pass()
    for m in _PYTHON_TAG.finditer(text):
        end = _PYTHON_END.search(text, m.end())
        limit = end.start() if end else len(text)
        segment = text[m.end() : limit]
        if not _BUILTIN_CALL.match(segment):
            continue
        calls = parse_pythonic(segment, ctx.budget, builtin=True) or []
        found.found.extend(Found(m.start(), k, c) for k, c in enumerate(calls))
        found.claimed.append((m.start(), end.end() if end else limit))
    return found
