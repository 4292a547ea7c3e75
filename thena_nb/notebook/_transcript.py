"""A run as a conversation, one turn inspected, and the turn table: pure functions to HTML.

The Stepper and a run's page (`run.to_html`) both show these. `transcript_html` is the
conversation (the user's input, each agent's replies, tool calls and their results with the
native/rescued and ok/failed badges); `inspector_parts` is one turn seen four ways (its
reply, what the model saw, its reasoning, its tools); `frame_table_html` is the turn table
with a few aligned columns and the full reply on expand. Every text a model, a tool or a
user wrote goes through `_html.escape` (or `_html.long_text`, which escapes).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from thena_nb.core.parts.steps import walk
from thena_nb.core.records import _html
from thena_nb.core.records.types import Message, ToolCall, Turn
from thena_nb.core.runs.run import Run

__all__ = [
    "INSPECTOR_TABS",
    "TRANSCRIPT_TURNS",
    "badges_html",
    "frame_table_html",
    "inspector_html",
    "inspector_parts",
    "model_of",
    "reasoning_html",
    "saw_html",
    "tools_html",
    "transcript_html",
]

INSPECTOR_TABS = ("Reply", "What the model saw", "Reasoning", "Tools")
"""The inspector's tabs, in order."""
TRANSCRIPT_TURNS = 40
"""Turns the Stepper's transcript shows around the current one (a page shows them all)."""
_SHORT = 80
PRE_STYLE = "white-space:pre-wrap;word-break:break-word;margin:2px 0"
esc = _html.escape


def _badge(kind: str, text: str) -> str:
    return f'<span class="thena-badge {esc(kind)}">{esc(text)}</span>'


def badges_html(call: ToolCall) -> str:
    """A call's badges: native or rescued, ok or failed (or not run yet), its decision, and
    how much of its result was cut (`max_tool_result_chars`)."""
    parts = [_badge(f"b-{call.source}", call.source)]
    if call.ok is True:
        parts.append(_badge("b-ok", "ok"))
    elif call.ok is False:
        parts.append(_badge("b-failed", "failed"))
    if call.decision is not None:
        parts.append(_badge("b-decision", call.decision))
    if call.result_cut:
        parts.append(_badge("b-cut", _html.cut_label(call.result_cut)))
    return " ".join(parts)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=None, default=str)


def _call_entry(call: ToolCall) -> str:
    head = f"<code>{esc(call.name)}</code>({esc(_short(_json(call.arguments), 200))})"
    out = [f'<div class="thena-call">→ {head} {badges_html(call)}']
    if call.error is not None:
        out.append(f'<div class="thena-bad-text">{_html.long_text(call.error, PRE_STYLE)}</div>')
    elif call.result is not None:
        out.append(_html.long_text(call.result, PRE_STYLE))
    out.append("</div>")
    return "".join(out)


def _turn_entry(turn: Turn, *, current: bool, pending: bool = False) -> str:
    where = [f"turn #{esc(turn.index)}", f'<span class="who">{esc(turn.agent)}</span>']
    if turn.iteration is not None:
        where.append(f"iteration {esc(turn.iteration)}")
    if turn.branch is not None:
        where.append(_badge("b-branch", f"branch {turn.branch}"))
    if turn.replayed:
        where.append(_badge("b-replayed", "replayed"))
    classes = "thena-entry turn" + (" current" if current else "") + (" pending" if pending else "")
    text = turn.info.response
    body = _html.long_text(text, PRE_STYLE) if text else "<i>(no text)</i>"
    calls = "".join(_call_entry(c) for c in turn.tool_calls)
    note = ' <i class="thena-muted">(joins the run when the block ends)</i>' if pending else ""
    return (
        f'<div class="{classes}" data-turn="{esc(turn.index)}" title="{esc(turn.step_path)}">'
        f"<div>{' · '.join(where)}{note}</div>{body}{calls}</div>"
    )


def transcript_html(
    run: Run,
    *,
    current: int | None = None,
    pending: Sequence[Turn] = (),
    live: tuple[str, str] | None = None,
    window: int | None = None,
    follow: bool = False,
) -> str:
    """The run as a conversation: the user's input, then each turn and its tool calls.

    With `follow`, the conversation ends at the `current` turn (the turns after it fold
    into a "later turns" summary) and its box opens scrolled to its end, so the turn shown
    is in view after every step and run with no script (a `column-reverse` box starts at
    its end).

    Args:
        run: The run.
        current: The turn shown in the inspector, highlighted.
        pending: Branch turns of a `parallel` block under way (not in `run.turns` yet).
        live: `(agent, streamed text)` of the model call in flight, if any.
        window: Show at most this many turns around `current` (all when `None`).
        follow: Scroll to `current` (the Stepper's view); a page shows the whole run.

    Example:
        >>> from thena_nb import Agent, Workflow
        >>> from thena_nb.models import ScriptedModel
        >>> run = Workflow("w", [Agent("A", model=ScriptedModel(["<b>hi</b>"]))]).run(
        ...     "hello", store=False)
        >>> html = transcript_html(run, current=0)
        >>> "&lt;b&gt;hi&lt;/b&gt;" in html, 'data-turn="0"' in html
        (True, True)
    """
    turns = run.turns
    lo, hi = _window(len(turns), current, window)
    parts = [
        '<div class="thena-transcript thena-follow"><div>'
        if follow
        else '<div class="thena-transcript">'
    ]
    if lo == 0:
        parts.append(
            f'<div class="thena-entry user"><span class="who">user</span>'
            f"{_html.long_text(run.input, PRE_STYLE)}</div>"
        )
    else:
        parts.append(f'<div class="thena-muted">… {lo} earlier turns</div>')
    parts.append(_entries_html(turns[lo:hi], current, follow=follow))
    if hi < len(turns):
        parts.append(f'<div class="thena-muted">… {len(turns) - hi} later turns</div>')
    parts.extend(_turn_entry(t, current=t.index == current, pending=True) for t in pending)
    if live is not None:
        agent, text = live
        parts.append(
            f'<div class="thena-entry live"><span class="who">{esc(agent)}</span> is '
            f"answering…{_html.long_text(text, PRE_STYLE) if text else ''}</div>"
        )
    parts.append("</div></div>" if follow else "</div>")
    return "".join(parts)


def _window(count: int, current: int | None, window: int | None) -> tuple[int, int]:
    """The `(lo, hi)` slice of `count` turns a transcript shows: `window` around `current`."""
    if window is None or count <= window:
        return 0, count
    mid = current if current is not None else count - 1
    lo = max(0, min(mid - window // 2, count - window))
    return lo, lo + window


def _entries_html(shown: Sequence[Turn], current: int | None, *, follow: bool) -> str:
    """The entries of `shown`; with `follow`, those after `current` folded (the Stepper's
    transcript ends at the turn it shows)."""
    later = [t for t in shown if t.index > current] if follow and current is not None else []
    entries = "".join(
        _turn_entry(t, current=t.index == current) for t in shown[: len(shown) - len(later)]
    )
    if not later:
        return entries
    folded = "".join(_turn_entry(t, current=False) for t in later)
    return (
        f'{entries}<details class="thena-later"><summary>'
        f"{esc(_html.plural(len(later), 'later turn'))} (after the one shown)</summary>"
        f"{folded}</details>"
    )


def _message_html(m: Message) -> str:
    who = m.role + (f" · {m.agent}" if m.agent else "")
    if m.tool_call_id:
        who += f" · result of {m.tool_call_id}" + (" (error)" if m.is_error else "")
    calls = "".join(
        f"<div>→ <code>{esc(c.name)}</code> {esc(_json(c.arguments))}</div>" for c in m.tool_calls
    )
    body = _html.long_text(m.content, PRE_STYLE) if m.content else "<i>(no text)</i>"
    return f'<div class="thena-entry msg-{esc(m.role)}"><b>{esc(who)}</b> {body}{calls}</div>'


def saw_html(run: Run, turn: Turn, *, model: Any = None) -> str:
    """What the model was sent for `turn`: system prompt, tool specs, the messages as sent,
    and (collapsed) the payload the adapter put on the wire."""
    try:
        request = run.request_of(turn)
    except (ValueError, TypeError) as exc:
        return f"<i>{esc(_unsent(turn, exc))}</i>"
    system = _html.long_text(request.system, PRE_STYLE) if request.system else "<i>(none)</i>"
    specs = "".join(
        f"<details><summary><code>{esc(s.name)}</code> {esc(_short(s.description, 120))}"
        f"</summary>{_html.long_text(json.dumps(s.parameters, indent=2), PRE_STYLE)}</details>"
        for s in request.tools
    )
    messages = "".join(_message_html(m) for m in request.messages)
    return (
        f'<div class="thena-saw"><h4>System prompt</h4><div class="thena-system">{system}</div>'
        f"<h4>Tools ({len(request.tools)})</h4>{specs or '<i>(none)</i>'}"
        f"<h4>Messages as sent ({len(request.messages)})</h4>{messages}"
        f"<div>model <code>{esc(request.model)}</code> · max_tokens "
        f"{esc(request.max_tokens)}</div>{_wire_html(run, turn, model)}</div>"
    )


def model_of(workflow: Any, turn: Turn) -> Any:
    """The model of the agent that took `turn` in `workflow` (by step path, else by agent
    name), or `None`: what renders the wire payload of a run that does not know its
    workflow (one loaded from a store) when the workflow is at hand."""
    if workflow is None:
        return None
    agents = [
        (path, step)
        for path, step in walk(workflow.steps, workflow.name)
        if getattr(step, "kind", None) == "agent"
    ]
    agents.sort(key=lambda found: found[0] != turn.step_path)  # its own path first
    named = [step for _, step in agents if step.name == turn.agent]
    return named[0].model if named else None


def _unsent(turn: Turn, exc: BaseException) -> str:
    if turn.branch is not None:
        return (
            f"turn {turn.index} ran in branch {turn.branch} of a parallel block: what it was "
            f"sent can be read once the block has merged"
        )
    return f"no request recorded for turn {turn.index}: {exc}"


def _wire_html(run: Run, turn: Turn, model: Any) -> str:
    try:
        wire = run.wire_request_of(turn, model=model)
        text = json.dumps(wire, indent=2, ensure_ascii=False, default=str)
    except Exception as exc:  # a render that fails is shown, never raised into a view
        text = f"(the wire payload could not be rendered: {type(exc).__name__}: {exc})"
    return (
        f'<details class="thena-wire"><summary>wire payload (what the adapter sent)</summary>'
        f"{_html.long_text(text, PRE_STYLE)}</details>"
    )


def reasoning_html(turn: Turn) -> str:
    """The model's reasoning for `turn`, kept apart from its answer."""
    if not turn.reasoning:
        return "<i>(no reasoning recorded for this turn)</i>"
    tokens = f"<div>{esc(turn.reasoning_tokens)} reasoning tokens</div>"
    return f"{_html.long_text(turn.reasoning, PRE_STYLE)}{tokens if turn.reasoning_tokens else ''}"


def tools_html(turn: Turn) -> str:
    """Each tool call of `turn`: arguments, result or error, and a traceback collapsed."""
    if not turn.tool_calls:
        return "<i>(no tool calls in this turn)</i>"
    out = []
    for call in turn.tool_calls:
        parts = [f"<div class='thena-entry'><code>{esc(call.name)}</code> {badges_html(call)}"]
        parts.append(f"<div>id <code>{esc(call.id)}</code></div><h4>arguments</h4>")
        parts.append(_html.long_text(json.dumps(call.arguments, indent=2, default=str), PRE_STYLE))
        if call.original_arguments is not None:
            parts.append("<h4>arguments the model gave</h4>")
            parts.append(_html.long_text(_json(call.original_arguments), PRE_STYLE))
        if call.error is not None:
            error = _html.long_text(call.error, PRE_STYLE)
            parts.append(f"<h4>error</h4><div class='thena-bad-text'>{error}</div>")
        elif call.result is not None:
            parts.append(f"<h4>result</h4>{_html.long_text(call.result, PRE_STYLE)}")
        if call.traceback:
            parts.append("<details class='thena-traceback'><summary>traceback</summary>")
            parts.append(f"{_html.long_text(call.traceback, PRE_STYLE)}</details>")
        out.append("".join(parts) + "</div>")
    return "".join(out)


def inspector_parts(run: Run, turn: Turn, *, reply: str | None = None) -> dict[str, str]:
    """`turn` seen four ways, by tab name (`INSPECTOR_TABS`).

    Args:
        run: The run the turn belongs to.
        turn: The turn.
        reply: The Reply tab's HTML; by default the turn's card (`_html.turn_html`).
    """
    return {
        "Reply": reply if reply is not None else _html.turn_html(turn),
        "What the model saw": saw_html(run, turn),
        "Reasoning": reasoning_html(turn),
        "Tools": tools_html(turn),
    }


def inspector_html(run: Run, turn_index: int) -> str:
    """The inspector of `run.turns[turn_index]` as static HTML: a tab bar and the four
    panels (a page's script switches them; without script they all show, one after another).

    Example:
        >>> from thena_nb import Agent, Workflow
        >>> from thena_nb.models import ScriptedModel
        >>> agent = Agent("A", model=ScriptedModel(["ok"]), system="Be <terse>.")
        >>> run = Workflow("w", [agent]).run("hi", store=False)
        >>> "Be &lt;terse&gt;." in inspector_html(run, 0)
        True
    """
    turn = run.turns[turn_index]
    parts = inspector_parts(run, turn)
    bar = "".join(
        f'<button type="button" class="thena-tab" data-tab="{k}">{esc(name)}</button>'
        for k, name in enumerate(INSPECTOR_TABS)
    )
    panels = "".join(
        f'<section class="thena-panel" data-tab="{k}"><h3>{esc(name)}</h3>{parts[name]}</section>'
        for k, name in enumerate(INSPECTOR_TABS)
    )
    return (
        f'<div class="thena-inspector" data-turn="{esc(turn.index)}">'
        f'<div class="thena-tabs">{bar}</div>{panels}</div>'
    )


_FRAME_HEAD = (("turn #", "num"), ("agent", ""), ("iteration", "num"), ("tools", ""))
_FRAME_TAIL = (("streak", "num"), ("reply", ""))


def frame_table_html(turns: Sequence[Turn], lo: int, hi: int, *, current: int | None = None) -> str:
    """The turn table of `turns[lo:hi]`: turn, agent (its step path on hover), iteration,
    tool calls with badges, failure streak and the reply (cut, the full text on expand)."""
    head = "".join(f'<th class="{c}">{n}</th>' for n, c in (*_FRAME_HEAD, *_FRAME_TAIL))
    rows = "".join(_frame_row(t, current) for t in turns[lo:hi])
    which = f"all {len(turns)}" if (lo, hi) == (0, len(turns)) else f"of {len(turns)}"
    span = f"turns #{lo}–#{hi - 1} ({which})" if hi > lo else "no turns"
    return (
        f'<div class="thena-frame thena-stepper-frame"><div>{esc(span)}</div>'
        f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>"
    )


def _frame_row(turn: Turn, current: int | None) -> str:
    agent = esc(turn.agent)
    if turn.branch is not None:
        agent += f" {_badge('b-branch', f'branch {turn.branch}')}"
    tools = "<br>".join(f"<code>{esc(c.name)}</code> {badges_html(c)}" for c in turn.tool_calls)
    text = turn.info.response
    if len(text) > _SHORT:
        reply = (
            f"<details><summary>{esc(_short(text, _SHORT))}</summary>"
            f"{_html.long_text(text, PRE_STYLE)}</details>"
        )
    else:
        reply = esc(text)
    cls = ' class="current"' if turn.index == current else ""
    return (
        f'<tr{cls} data-turn="{esc(turn.index)}"><td class="num">{esc(turn.index)}</td>'
        f'<td title="{esc(turn.step_path)}">{agent}</td>'
        f'<td class="num">{esc(turn.iteration if turn.iteration is not None else "")}</td>'
        f'<td>{tools}</td><td class="num">{esc(turn.consecutive_fails)}</td>'
        f'<td class="reply">{reply}</td></tr>'
    )


def _short(text: object, limit: int) -> str:
    value = "" if text is None else str(text)
    value = " ".join(value.split())
    return value if len(value) <= limit else value[: limit - 1] + "…"
