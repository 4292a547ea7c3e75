"""The one place that escapes text and builds HTML: turns, workflows and runs.

Standard library only (and the one callable namer of `steps`), so `_repr_html_` works
without IPython, pandas or matplotlib. Every
piece of text that a model, a tool or a user wrote goes through `escape`; the only markup
taken as given is what the notebook layer renders itself (`frame_html`, a base64 PNG).
Inline styles are kept small and there are no scripts.
"""

from __future__ import annotations

import difflib
import html
import itertools
import json
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from thena_nb.core.records._text import callable_name

__all__ = [
    "cut_label",
    "diff_html",
    "escape",
    "long_text",
    "marked",
    "plural",
    "run_html",
    "turn_html",
    "turn_info_html",
    "without_controls",
    "workflow_html",
]

_BOX = "border:1px solid #ccc;border-radius:4px;padding:4px 8px;margin:3px 0"
_PRE = "white-space:pre-wrap;word-break:break-word;margin:2px 0;padding:2px 4px;font-size:90%"
_BADGE = "display:inline-block;padding:0 6px;border-radius:8px;font-size:85%;color:#fff"
_CELL = "text-align:left;vertical-align:top"
_COLORS = {
    "native": "#1f77b4",
    "rescued": "#8c564b",
    "ok": "#2ca02c",
    "failed": "#d62728",
    "finished": "#2ca02c",
    "running": "#1f77b4",
    "stopped": "#ff7f0e",
    "budget": "#ff7f0e",
    "until": "#2ca02c",
    "exhausted": "#ff7f0e",
    "fails": "#d62728",
    "stop": "#ff7f0e",
    "agent": "#9467bd",
    "message": "#9467bd",
    "reply": "#d62728",
    "tool_result": "#d62728",
    "steps": "#777",
    "replayed": "#17becf",
    "cut": "#a04a00",
}
_TABLE_ROWS = 40
_SHORT_TEXT = 80
_DIFF_ROWS = 20
"""Pairs a diff shows from its first divergence on."""
_DIFF_TEXT = 4000
"""Characters of a text a diff compares and shows."""
_DEL = "background:#fdd;text-decoration:line-through"
_INS = "background:#dfd;text-decoration:none"
_DIFFERS = {"only_a": "only in run a", "only_b": "only in run b", "tool_results": "tool results"}
_WORDS = re.compile(r"\w+|\s+|[^\w\s]")


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
"""Control characters HTML shows as nothing or refuses: all but tab, newline and return."""


def _visible(found: re.Match[str]) -> str:
    r"""A control character as text: its control picture (`\x1b` as `␛`), or `\x9b`."""
    code = ord(found.group())
    if code < 0x20:
        return chr(0x2400 + code)
    return "\u2421" if code == 0x7F else f"\\x{code:02x}"


def escape(text: object) -> str:
    r"""Text made safe to place in HTML, quotes included; `None` gives `""`.

    Control characters are shown, never emitted raw: a terminal's colour code `\x1b[31m`
    reads `␛[31m` (each C0 control but tab, newline and return as its control picture,
    DEL as `␡`, a C1 control as `\x9b`).

    Args:
        text: Anything; non-strings are converted with `str`.

    Returns:
        The escaped text.
    """
    if text is None:
        return ""
    return without_controls(html.escape(text if isinstance(text, str) else str(text), quote=True))


def without_controls(text: str) -> str:
    r"""`text` with its control characters shown as text, as `escape` shows them (for text
    that something else escapes, such as pandas' `to_html`)."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(_visible, text)


def turn_info_html(info: Any) -> str:
    """A `TurnInfo` as a small HTML table.

    Args:
        info: A `TurnInfo` (or anything with its fields).

    Returns:
        HTML text.
    """
    rows = [
        ("called_tool", _code(info.called_tool)),
        ("tool_name", _code(info.tool_name)),
        ("tool_error", _code(info.tool_error)),
        ("tool_call_source", _source_badge(info.tool_call_source)),
        ("response", _pre_or_none(info.response)),
    ]
    body = "".join(
        f'<tr><th style="{_CELL}">{name}</th><td style="text-align:left">{value}</td></tr>'
        for name, value in rows
    )
    return f'<table class="thena-turn-info">{body}</table>'


def turn_html(turn: Any) -> str:
    """One turn: where it ran, its text, its tool calls with arguments and outcome.

    Args:
        turn: A `Turn` (or anything with its fields).

    Returns:
        HTML text.
    """
    head = [f"<b>turn {escape(turn.index)}</b>", f"<b>{escape(turn.agent)}</b>"]
    head.append(f"<code>{escape(turn.step_path)}</code>")
    if turn.iteration is not None:
        head.append(f"iteration {escape(turn.iteration)}")
    if turn.branch is not None:
        head.append(f"branch {escape(turn.branch)}")
    if turn.info.tool_call_source is not None:
        head.append(_source_badge(turn.info.tool_call_source))
    facts = [f"finish reason <code>{escape(turn.finish_reason)}</code>"]
    facts.append(f"tokens {escape(turn.input_tokens)} in / {escape(turn.output_tokens)} out")
    if turn.attempts != 1:
        facts.append(f"{escape(turn.attempts)} attempts")
    facts.append(f"failure streak {escape(turn.consecutive_fails)}")
    parts = [
        f'<div class="thena-turn" style="{_BOX}">',
        f"<div>{' · '.join(head)}</div>",
        _pre_or_none(turn.info.response),
    ]
    calls = list(turn.tool_calls)
    if calls:
        parts.append("<ol style='margin:2px 0'>" + "".join(map(_call_html, calls)) + "</ol>")
    refused = list(getattr(turn, "refused_calls", None) or ())
    if refused:
        parts.append("<div>not run:</div>")
        parts.append("<ul style='margin:2px 0'>" + "".join(map(_call_html, refused)) + "</ul>")
    parts.append(f"<div style='font-size:85%;color:#555'>{' · '.join(facts)}</div></div>")
    return "".join(parts)


def workflow_html(wf: Any) -> str:
    """A workflow's step tree: parallel branches side by side, loops with their limits.

    Args:
        wf: A `Workflow` (anything with `name` and `steps`; `state` and `budget` if set).

    Returns:
        HTML text.
    """
    head = [f"workflow <b>{escape(wf.name)}</b>"]
    state = getattr(wf, "state", None)
    if state is not None:
        head.append(f"state <code>{escape(getattr(state, '__name__', state))}</code>")
    budget = getattr(wf, "budget", None)
    if budget is not None:
        head.append(f"budget <code>{escape(budget)}</code>")
    steps = "".join(_step_html(step, i) for i, step in enumerate(wf.steps))
    return f'<div class="thena-workflow"><div>{" · ".join(head)}</div>{steps}</div>'


def run_html(run: Any, *, frame_html: str | None = None, chart_png_b64: str | None = None) -> str:
    """A run: status, each loop's stop reason, usage, the turn table and the chart.

    Args:
        run: A `Run` (or anything with its fields).
        frame_html: The turn table as HTML, rendered (and escaped) by the notebook layer; when
            `None` a plain table of the turns is built here.
        chart_png_b64: The failure chart as base64 PNG text, or `None` for no chart.

    Returns:
        HTML text.
    """
    status = getattr(run, "status", None)
    head = [f"run of <b>{escape(getattr(run, 'workflow_name', ''))}</b>", _status_badge(run)]
    head.append(f"<code>{escape(getattr(run, 'run_id', ''))}</code>")
    parts = [f'<div class="thena-run"><div>{" · ".join(head)}</div>']
    error = getattr(run, "error", None)
    if error:
        parts.append(f'<pre style="{_PRE};color:{_COLORS["failed"]}">{escape(error)}</pre>')
    output = getattr(run, "output", None)
    if output is not None and output != "":
        parts.append(f"<div>output</div><pre style='{_PRE}'>{escape(output)}</pre>")
    elif status == "finished":
        parts.append("<div>output <i style='color:#777'>(empty answer)</i></div>")
    loops = list(getattr(run, "loops", None) or ())
    if loops:
        parts.append(_loops_table(loops))
    usage = getattr(run, "usage", None)
    if usage is not None:
        parts.append(f"<div>{_usage_text(usage)}</div>")
    turns = list(getattr(run, "turns", None) or ())
    if frame_html is not None:
        parts.append(f'<div class="thena-frame" style="overflow-x:auto">{frame_html}</div>')
    elif turns:
        parts.append(_turns_table(turns))
    if chart_png_b64:
        parts.append(
            f'<img alt="failure chart" src="data:image/png;base64,{escape(chart_png_b64)}"/>'
        )
    parts.append("</div>")
    return "".join(parts)


def diff_html(diff: Any) -> str:
    """Two runs side by side from their first divergence on, the differences marked.

    The pairs before the divergence are one line; from it on, each pair is a row with run
    `a`'s turn beside run `b`'s, and where a reply's text, a call's arguments or a tool's
    result differ, the words that differ are struck out on the left and marked on the right.

    Args:
        diff: A `RunDiff` (anything with `a`, `b`, `pairs`, `first_divergence`,
            `divergence_pair` and `turns(pair)`).

    Returns:
        HTML text.
    """
    a, b, pairs = diff.a, diff.b, diff.pairs
    head = (
        f"diff of run <code>{escape(a.run_id)}</code> (a) and <code>{escape(b.run_id)}</code>"
        f" (b) · {escape(plural(len(pairs), 'aligned turn'))}"
    )
    d = diff.first_divergence
    if d is None:
        verdict = f"{_badge('ok', 'agree')} the runs agree turn for turn"
        return f'<div class="thena-diff"><div>{head}</div><div>{verdict}</div></div>'
    at = diff.divergence_pair
    where = f"turn {escape(_or_none(d.turn_a))} of a, {escape(_or_none(d.turn_b))} of b"
    verdict = (
        f"first divergence at {where} · <code>{escape(d.step_path)}</code> · "
        f"{_badge(d.cause)} {escape(d.detail)}"
    )
    header = f"<tr><th style='{_CELL}'>where</th><th style='{_CELL}'>run a</th>"
    header += f"<th style='{_CELL}'>run b</th></tr>"
    rows = []
    if at:
        reused = sum(1 for pair in pairs[:at] if pair.reused)
        note = f" ({reused} reused from a recording)" if reused else ""
        agree = "the first turn agrees" if at == 1 else f"the first {at} turns agree"
        rows.append(f"<tr><td colspan='3'><i>{escape(agree)}{note}</i></td></tr>")
    shown = pairs[at : at + _DIFF_ROWS]
    rows.extend(_diff_row(diff, pair, i == 0) for i, pair in enumerate(shown))
    rest = len(pairs) - at - len(shown)
    if rest:
        more = f"{rest} more {'turn' if rest == 1 else 'turns'} not shown"
        rows.append(f"<tr><td colspan='3'><i>{escape(more)}</i></td></tr>")
    table = f"<table><thead>{header}</thead><tbody>{''.join(rows)}</tbody></table>"
    return f'<div class="thena-diff"><div>{head}</div><div>{verdict}</div>{table}</div>'


def _or_none(value: object) -> str:
    return "none" if value is None else str(value)


def _diff_row(diff: Any, pair: Any, first: bool) -> str:
    ta, tb = diff.turns(pair)
    differs = ", ".join(_DIFFERS.get(d, d) for d in pair.differs) or "the same"
    if pair.reused:
        differs += " (reused)"
    where = (
        f"<code>{escape(pair.step_path)}</code><div style='font-size:85%'>{escape(differs)}</div>"
    )
    cell_a, cell_b = _diff_cells(ta, tb, set(pair.differs))
    mark = f";border-left:3px solid {_COLORS['failed']}" if first else ""
    return (
        f"<tr><td style='{_CELL}{mark}'>{where}</td><td style='{_CELL}'>{cell_a}</td>"
        f"<td style='{_CELL}'>{cell_b}</td></tr>"
    )


def _diff_cells(ta: Any, tb: Any, differs: set[str]) -> tuple[str, str]:
    none = "<div style='color:#777'><i>no turn here</i></div>"
    if ta is None or tb is None:
        turn = ta if ta is not None else tb
        alone = (
            _diff_head(turn)
            + _pre_or_none(turn.info.response)
            + _diff_calls(turn.tool_calls, [])[0]
        )
        return (alone, none) if ta is not None else (none, alone)
    if "reply" in differs:
        text_a, text_b = _marked(ta.info.response, tb.info.response)
    else:
        text_a = text_b = _pre_or_none(ta.info.response)
    calls_a, calls_b = _diff_calls(ta.tool_calls, tb.tool_calls)
    return _diff_head(ta) + text_a + calls_a, _diff_head(tb) + text_b + calls_b


def _diff_head(turn: Any) -> str:
    parts = [f"<b>turn {escape(turn.index)}</b>", escape(turn.agent)]
    if turn.iteration is not None:
        parts.append(f"iteration {escape(turn.iteration)}")
    if turn.replayed:
        parts.append(_badge("replayed"))
    return f"<div>{' · '.join(parts)}</div>"


def _diff_calls(calls_a: Sequence[Any], calls_b: Sequence[Any]) -> tuple[str, str]:
    """The calls of two turns, call by call, with differing arguments and results marked."""
    items_a: list[str] = []
    items_b: list[str] = []
    for ca, cb in itertools.zip_longest(calls_a, calls_b):
        if ca is None or cb is None:
            call = ca if ca is not None else cb
            item = _diff_call(call, _pre(_arguments(call)), _pre(_outcome(call)))
            (items_a if ca is not None else items_b).append(item)
            continue
        args_a, args_b = _marked(_arguments(ca), _arguments(cb))
        out_a, out_b = _marked(_outcome(ca), _outcome(cb))
        items_a.append(_diff_call(ca, args_a, out_a))
        items_b.append(_diff_call(cb, args_b, out_b))
    return _ol(items_a), _ol(items_b)


def _ol(items: list[str]) -> str:
    return f"<ol style='margin:2px 0'>{''.join(items)}</ol>" if items else ""


def _diff_call(call: Any, arguments: str, outcome: str) -> str:
    status = " " + _badge("ok" if call.ok else "failed") if call.ok is not None else ""
    return f"<li><code>{escape(call.name)}</code>{status}{arguments}{outcome}</li>"


def _arguments(call: Any) -> str:
    return json.dumps(call.arguments, ensure_ascii=False, default=str)


def _outcome(call: Any) -> str:
    if call.ok is False:
        return call.error or ""
    return call.result or ""


def _pre(text: str) -> str:
    return f'<pre style="{_PRE}">{escape(text)}</pre>' if text else ""


def _marked(a: str, b: str) -> tuple[str, str]:
    """`a` and `b` as two `<pre>` blocks, the words of `a` that `b` lacks struck out and the
    words `b` adds marked; every piece escaped."""
    if a == b:
        return _pre(a), _pre(b)
    words_a = _WORDS.findall(_short(a, _DIFF_TEXT))
    words_b = _WORDS.findall(_short(b, _DIFF_TEXT))
    matcher = difflib.SequenceMatcher(None, words_a, words_b, autojunk=False)
    out_a: list[str] = []
    out_b: list[str] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        piece_a, piece_b = escape("".join(words_a[i1:i2])), escape("".join(words_b[j1:j2]))
        if tag == "equal":
            out_a.append(piece_a)
            out_b.append(piece_b)
            continue
        if piece_a:
            out_a.append(f'<del style="{_DEL}">{piece_a}</del>')
        if piece_b:
            out_b.append(f'<ins style="{_INS}">{piece_b}</ins>')
    empty = "<i style='color:#777'>(no text)</i>"
    return (
        f'<pre style="{_PRE}">{"".join(out_a) or empty}</pre>',
        f'<pre style="{_PRE}">{"".join(out_b) or empty}</pre>',
    )


def _step_html(step: Any, index: int) -> str:
    kind = getattr(step, "kind", None)
    label = f"<span style='color:#777'>{index}.</span> "
    if kind == "parallel":
        branches = "".join(
            f'<div style="flex:1;min-width:0">{_step_html(s, i)}</div>'
            for i, s in enumerate(step.steps)
        )
        return (
            f'<div class="thena-parallel" style="{_BOX}">{label}<b>parallel</b>'
            f'<div style="display:flex;gap:6px">{branches}</div></div>'
        )
    if kind == "loop":
        return (
            f'<div class="thena-loop" style="{_BOX}">{label}<b>loop</b> {_loop_limits(step)}'
            f"<div style='margin-left:12px'>"
            + "".join(_step_html(s, i) for i, s in enumerate(step.steps))
            + "</div></div>"
        )
    if hasattr(step, "model"):
        model = getattr(step.model, "name", None) or type(step.model).__name__
        tools = [getattr(t, "name", None) or callable_name(t) for t in getattr(step, "tools", ())]
        tool_text = ", ".join(f"<code>{escape(t)}</code>" for t in tools) or "no tools"
        return (
            f'<div class="thena-agent" style="{_BOX}">{label}<b>{escape(step.name)}</b>'
            f" · model <code>{escape(model)}</code> · tools {tool_text}</div>"
        )
    return (
        f'<div class="thena-function" style="{_BOX}">{label}'
        f"<code>{escape(callable_name(step))}(ctx)</code></div>"
    )


def _loop_limits(step: Any) -> str:
    items = [f"until <code>{escape(callable_name(step.until))}</code>"]
    items.append(f"max_iterations {escape(step.max_iterations)}")
    max_fails = step.max_fails
    off = isinstance(max_fails, float) and math.isinf(max_fails)
    items.append("max_fails off" if off else f"max_fails {escape(max_fails)}")
    for hook in ("on_exhausted", "on_fail"):
        fn = getattr(step, hook, None)
        if fn is not None:
            items.append(f"{hook} <code>{escape(callable_name(fn))}</code>")
    return " · ".join(items)


def _loops_table(loops: Sequence[Any]) -> str:
    header = ("loop", "stop reason", "iterations", "failures")
    rows = []
    for node in loops:
        iterations = f"{node.iterations}"
        if getattr(node, "max_iterations", None) is not None:
            iterations += f" / {node.max_iterations}"
        if node.stop_reason is not None:
            reason = _badge(node.stop_reason)
        elif getattr(node, "error", None):
            reason = _badge("failed", "error")
        else:
            reason = "—"
        failure = node.failures
        failures = "—"
        if failure is not None:
            failures = (
                f"{escape(failure.consecutive)} in a row, {escape(failure.total)} in all; "
                f"last <code>{escape(failure.tool_name)}</code>"
                f"<pre style='{_PRE}'>{escape(_short(failure.message, 300))}</pre>"
            )
        rows.append((f"<code>{escape(node.path)}</code>", reason, escape(iterations), failures))
    return _table(header, rows)


_ENDED_BADLY = ("fails", "exhausted", "budget")
"""Stop reasons of a run's last loop that a "finished" badge must not hide."""


def _status_badge(run: Any) -> str:
    """The run's status; a finished run whose last step was a loop that stopped on `fails`,
    `exhausted` or `budget` gets a warning badge naming the reason instead of a green one."""
    status = getattr(run, "status", None)
    report = getattr(run, "report", None)
    last = report.children[-1] if report is not None and report.children else None
    reason = getattr(last, "stop_reason", None) if getattr(last, "kind", "") == "loop" else None
    if status == "finished" and reason in _ENDED_BADLY:
        return _badge(reason, f"finished · {reason}")
    return _badge(status)


def plural(count: int, word: str) -> str:
    """`"1 turn"`, `"2 turns"`: a count and its noun, singular for exactly one."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _usage_text(usage: Any) -> str:
    parts = [
        plural(usage.input_tokens, "input token"),
        plural(usage.output_tokens, "output token"),
    ]
    cached = (usage.cache_read_tokens, usage.cache_write_tokens)
    if any(cached):
        parts.append(f"cache {cached[0]} read / {cached[1]} written")
    parts.append(plural(usage.model_calls, "model call"))
    parts.append(plural(usage.tool_calls, "tool call"))
    return escape(" · ".join(parts))


def _turns_table(turns: Sequence[Any]) -> str:
    header = ("turn", "step", "iteration", "tool", "source", "tool error", "streak", "response")
    shown: Iterable[Any] = turns
    note = ""
    if len(turns) > _TABLE_ROWS:
        half = _TABLE_ROWS // 2
        shown = [*turns[:half], *turns[-half:]]
        note = f"<div>{len(turns)} turns; first and last {half} shown</div>"
    rows = []
    for turn in shown:
        info = turn.info
        rows.append(
            (
                escape(turn.index),
                f"<code>{escape(turn.step_path)}</code>",
                escape(turn.iteration),
                escape(info.tool_name),
                escape(info.tool_call_source),
                escape(info.tool_error),
                escape(turn.consecutive_fails),
                escape(_short(info.response, _SHORT_TEXT)),
            )
        )
    return _table(header, rows) + note


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _call_html(call: Any) -> str:
    arguments = json.dumps(call.arguments, ensure_ascii=False, default=str)
    parts = [f"<li><code>{escape(call.name)}</code> ", _source_badge(call.source)]
    if call.ok is True:
        parts.append(" " + _badge("ok"))
    elif call.ok is False:
        parts.append(" " + _badge("failed"))
    cut = getattr(call, "result_cut", None)
    if cut:
        parts.append(" " + _badge("cut", cut_label(cut)))
    parts.append(long_text(arguments, _PRE))
    if call.error is not None:
        parts.append(long_text(call.error, f"{_PRE};color:{_COLORS['failed']}"))
    elif call.result is not None:
        parts.append(long_text(call.result, f"{_PRE};background:#f6f6f6"))
    parts.append("</li>")
    return "".join(parts)


def cut_label(cut: int) -> str:
    """What a view says of a tool result cut by `max_tool_result_chars`."""
    return f"cut: {cut:,} characters"


def _source_badge(source: str | None) -> str:
    return _badge(source) if source is not None else _code(None)


def _badge(value: object, text: object = None) -> str:
    if value is None:
        return _code(None)
    color = _COLORS.get(str(value), "#777")
    return f'<span style="{_BADGE};background:{color}">{escape(text or value)}</span>'


def _code(value: object) -> str:
    return f"<code>{escape(value) if value is not None else 'None'}</code>"


def _pre_or_none(text: str | None) -> str:
    if not text:
        return "<div style='color:#777'><i>(no text)</i></div>"
    return long_text(text, _PRE)


SHOWN_CHARS = 4_000
"""Characters of a long text (a reply, a tool's result) a view shows at first."""
SHOW_ALL_CHARS = 200_000
"""Characters "show all" unfolds; the record keeps the whole text."""


def long_text(text: str, style: str) -> str:
    """`text` in a `<pre>`, escaped; a long one cut at `SHOWN_CHARS` with a "show all" that
    unfolds up to `SHOW_ALL_CHARS`, so a 10 MB tool result never makes a 10 MB page.

    An empty `style` gives a bare `<pre>`, for a page whose stylesheet styles it (a run's
    page repeats this element for every message it shows).
    """
    if len(text) <= SHOWN_CHARS:
        return (
            f'<pre style="{style}">{escape(text)}</pre>' if style else f"<pre>{escape(text)}</pre>"
        )
    size = f"{len(text):,} characters"
    rest = text[SHOWN_CHARS:SHOW_ALL_CHARS]
    more = ""
    if len(text) > SHOW_ALL_CHARS:
        more = f"<div><i>… cut at {SHOW_ALL_CHARS:,} of {size}; the record has it all</i></div>"
    lead = f"{style};" if style else ""
    return (
        f'<pre style="{lead}margin-bottom:0">{escape(text[:SHOWN_CHARS])}</pre>'
        f"<details><summary>show all ({size})</summary>"
        f'<pre style="{lead}margin-top:0">{escape(rest)}</pre>{more}</details>'
    )


def marked(a: str, b: str) -> tuple[str, str]:
    """Two texts as two `<pre>` blocks, the words of `a` that `b` lacks struck out and the
    words `b` adds marked; every piece escaped, each text compared up to `_DIFF_TEXT`
    characters (what a changed system prompt shows on a run's page).

    Args:
        a: The text before.
        b: The text after.

    Returns:
        `(html_of_a, html_of_b)`.
    """
    return _marked(a, b)


def _short(text: object, limit: int) -> str:
    value = "" if text is None else str(text)
    return value if len(value) <= limit else value[: limit - 1] + "…"
