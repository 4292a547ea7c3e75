"""A run as one self-contained HTML page: `run.to_html(path)`.

The page holds the run's header, the transcript, one inspector per turn, the turn table and
the failure chart as inline SVG, styled by `_theme.STYLE` (light, or dark when the browser
asks). A few lines of inline script step back and forward over the turns and switch the
inspector's tabs; without script every turn's inspector shows, one after another. Nothing is
fetched: no CDN, no font, no image from elsewhere, no kernel. The page's
Content-Security-Policy allows no network at all and only its own script (by hash), so no
script in model text could run even if escaping failed; every text is escaped through
`_html.escape` anyway.

What each turn's model was sent is shown by difference, so that the page grows with the run,
not with its square (each request repeats the history before it): the messages a turn's
request shares with the previous turn's request are one line that links to it, and only the
messages new since then are shown; a history message already shown with an earlier turn is
a link to it. Each distinct system prompt and list of tool specs is shown in full once, with
the first turn that sent it; a later turn links there, and a turn whose agent's system
prompt changed shows what changed. The payload the adapter put on the wire is shown for the
first turn only (`run.wire_request_of(turn)` gives any turn's).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

from thena_nb.core.records import _html, _sent
from thena_nb.core.records.types import HistorySpan, Message, ToolCall, Turn
from thena_nb.core.runs.run import Run
from thena_nb.notebook import _svg_chart, _theme, _transcript

__all__ = ["SCRIPT", "run_page_html", "write_run_page"]

esc = _html.escape

SCRIPT = """(function () {
  var views = document.querySelectorAll('.thena-turn-view'), n = views.length, at = 0;
  function show(k) {
    if (!n) return;
    at = Math.max(0, Math.min(n - 1, k));
    document.querySelectorAll('[data-turn]').forEach(function (e) {
      var on = e.getAttribute('data-turn') === String(at);
      if (e.classList.contains('thena-turn-view')) e.hidden = !on;
      else e.classList.toggle('current', on);
    });
    var pos = document.getElementById('thena-pos');
    pos.textContent = 'turn ' + at + ' (' + (at + 1) + ' of ' + n + ')';
  }
  document.getElementById('thena-back').onclick = function () { show(at - 1); };
  document.getElementById('thena-forward').onclick = function () { show(at + 1); };
  document.addEventListener('keydown', function (ev) {
    if (ev.key === 'ArrowLeft') show(at - 1);
    if (ev.key === 'ArrowRight') show(at + 1);
  });
  document.addEventListener('click', function (ev) {
    var link = ev.target.closest('a[href^="#thena-"]');
    if (link) {
      var to = document.getElementById(link.getAttribute('href').slice(1));
      var view = to && to.closest('.thena-turn-view'), panel = to && to.closest('.thena-panel');
      if (panel) document.body.setAttribute('data-tab', panel.getAttribute('data-tab'));
      if (view) show(parseInt(view.getAttribute('data-turn'), 10));
      return;
    }
    var tab = ev.target.closest('.thena-tab');
    if (tab) { document.body.setAttribute('data-tab', tab.getAttribute('data-tab')); return; }
    var entry = ev.target.closest('.thena-entry.turn, .thena-frame tr[data-turn]');
    if (entry) show(parseInt(entry.getAttribute('data-turn'), 10));
  });
  document.body.setAttribute('data-tab', '0');
  show(0);
})();"""
"""The page's one script: back/forward over turns, the inspector's tabs, click to select,
and a link to an earlier request shows the turn it is in."""

_PAGE_STYLE = """
body.thena-page { margin: 12px; background: var(--jp-layout-color1, #fff); }
.thena-page .thena-columns { display: flex; flex-wrap: wrap; gap: 12px; }
.thena-page .thena-columns > * { flex: 1 1 340px; min-width: 0; }
.thena-page .thena-transcript { max-height: 70vh; }
.thena-page .thena-nav button, .thena-page .thena-tab { font: inherit; color: var(--thena-fg);
  background: var(--thena-bg-alt); border: 1px solid var(--thena-border); border-radius: 3px;
  padding: 2px 10px; cursor: pointer; }
body[data-tab] .thena-panel { display: none; }
body[data-tab] .thena-panel h3 { display: none; }
body[data-tab="0"] .thena-panel[data-tab="0"], body[data-tab="1"] .thena-panel[data-tab="1"],
body[data-tab="2"] .thena-panel[data-tab="2"],
body[data-tab="3"] .thena-panel[data-tab="3"] { display: block; }
body[data-tab="0"] .thena-tab[data-tab="0"], body[data-tab="1"] .thena-tab[data-tab="1"],
body[data-tab="2"] .thena-tab[data-tab="2"],
body[data-tab="3"] .thena-tab[data-tab="3"] { border-color: var(--thena-accent); }
.thena-chart line.now { display: none; stroke: var(--thena-ok); stroke-width: 2; }
.thena-chart line.now.current { display: inline; }
.thena-entry.turn, .thena-frame tr[data-turn] { cursor: pointer; }
.thena-page pre { white-space: pre-wrap; word-break: break-word; margin: 2px 0; }
.thena-page a { color: var(--thena-accent); }
.thena-page .thena-ref { color: var(--thena-fg); font-style: italic; margin: 2px 0; }
.thena-page .thena-saw ins { background: rgba(46, 125, 50, 0.25); text-decoration: none; }
.thena-page .thena-saw del { background: rgba(198, 40, 40, 0.25); }
"""
_NO_SCRIPT = (
    "<noscript><style>.thena-turn-view[hidden] { display: block; } .thena-tabs { display: none; }"
    " .thena-turn-view { border-top: 2px solid var(--thena-border); }</style></noscript>"
)
"""Without script, every turn's inspector shows, one after another (the script hides all
but one), and the tab bars that only the script works are hidden."""
_TOOL_NAMES = 6
"""Tool names a turn lists beside a link to the turn that showed its tool specs."""


def run_page_html(run: Run) -> str:
    """The page of `run` as HTML text (see the module's docs).

    Example:
        >>> from thena_nb import Agent, Workflow
        >>> from thena_nb.models import ScriptedModel
        >>> run = Workflow("w", [Agent("A", model=ScriptedModel(["<script>x()</script>"]))]
        ...                ).run("hi", store=False)
        >>> page = run_page_html(run)
        >>> page.startswith("<!doctype html>"), "<script>x()" in page, page.count("<script")
        (True, False, 1)
    """
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode("ascii")
    policy = (
        f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{digest}'"
    )
    title = f"{run.workflow_name} · run {run.run_id}"
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        f"<title>{_html.escape(title)}</title>"
        f"<style>{_theme.STYLE}{_theme.DARK_VARIABLES}{_PAGE_STYLE}</style>{_NO_SCRIPT}</head>"
        f'<body class="{_theme.UI_CLASS} thena-page">{_lean(_body(run))}'
        f"<script>{SCRIPT}</script></body></html>\n"
    )


def _body(run: Run) -> str:
    n = len(run.turns)
    sent = _Requests(run)
    views = "".join(
        f'<div class="thena-turn-view" data-turn="{i}"{" hidden" if i else ""}>'
        f"{_inspector(run, turn, sent.html(turn), first=i == 0)}</div>"
        for i, turn in enumerate(run.turns)
    )
    nav = (
        '<div class="thena-nav"><button type="button" id="thena-back">◀ back</button> '
        f'<span id="thena-pos">{"turn 0 (1 of " + str(n) + ")" if n else "no turns"}</span> '
        '<button type="button" id="thena-forward">forward ▶</button></div>'
    )
    chart = _svg_chart.failure_chart_svg(run.turns, run.loops, every_turn=True)
    table = _transcript.frame_table_html(run.turns, 0, n) if n else ""
    return (
        f"{_header(run)}{nav}<div class='thena-columns'>"
        f"{_transcript.transcript_html(run)}<div>{views or '<i>no turns</i>'}</div></div>"
        f"<h3>Turns</h3>{table}<h3>Failure chart</h3>{chart if run.loops else '<i>no loops</i>'}"
    )


def _inspector(run: Run, turn: Turn, saw: str, *, first: bool) -> str:
    """`turn`'s inspector: a tab bar and the four panels (`_transcript.INSPECTOR_TABS`), its
    request shown by difference (`saw`), the wire payload on the first turn only (the last
    one's holds nearly the whole history again)."""
    if first:
        saw += _wire_html(run, turn)
    reasoning = _transcript.reasoning_html(turn) if turn.reasoning else "<i>(none)</i>"
    parts = (_reply_html(turn), saw, reasoning, _transcript.tools_html(turn))
    names = _transcript.INSPECTOR_TABS
    bar = "".join(
        f'<button class="thena-tab" data-tab="{k}">{esc(name)}</button>'
        for k, name in enumerate(names)
    )
    panels = "".join(
        f'<section class="thena-panel" data-tab="{k}"><h3>{esc(name)}</h3>{part}</section>'
        for k, (name, part) in enumerate(zip(names, parts, strict=True))
    )
    return f'<div class="thena-inspector"><div class="thena-tabs">{bar}</div>{panels}</div>'


def _reply_html(turn: Turn) -> str:
    """The Reply panel: where the turn ran, its text, one line per tool call (the Tools
    panel has their arguments and results in full), its finish reason and tokens."""
    head = [f"<b>turn {turn.index}</b>", f"<b>{esc(turn.agent)}</b>"]
    head.append(f"<code>{esc(turn.step_path)}</code>")
    if turn.iteration is not None:
        head.append(f"iteration {turn.iteration}")
    if turn.branch is not None:
        head.append(f"branch {turn.branch}")
    text = turn.info.response
    body = _html.long_text(text, "") if text else "<i>(no text)</i>"
    calls = "".join(_call_line(call) for call in turn.tool_calls)
    refused = list(getattr(turn, "refused_calls", None) or ())  # gated runs: calls not run
    if refused:
        calls += "<div>not run:</div>" + "".join(_call_line(call) for call in refused)
    facts = [f"finish reason <code>{esc(turn.finish_reason)}</code>"]
    facts.append(f"tokens {turn.input_tokens} in / {turn.output_tokens} out")
    if turn.attempts != 1:
        facts.append(f"{turn.attempts} attempts")
    facts.append(f"failure streak {turn.consecutive_fails}")
    return (
        f'<div class="thena-entry"><div>{" · ".join(head)}</div>{body}{calls}'
        f"<div>{' · '.join(facts)}</div></div>"
    )


def _call_line(call: ToolCall) -> str:
    arguments = _short(json.dumps(call.arguments, ensure_ascii=False, default=str), 200)
    return (
        f'<div class="thena-call">→ <code>{esc(call.name)}</code>({esc(arguments)}) '
        f"{_transcript.badges_html(call)}</div>"
    )


def _wire_html(run: Run, turn: Turn) -> str:
    try:
        wire = run.wire_request_of(turn)
        text = json.dumps(wire, indent=2, ensure_ascii=False, default=str)
    except Exception as exc:  # a render that fails is shown, never raised into the page
        text = f"(the wire payload could not be rendered: {type(exc).__name__}: {exc})"
    return (
        '<details class="thena-wire"><summary>wire payload of turn 0 (what the adapter sent; '
        "any turn's: <code>run.wire_request_of(turn)</code>)</summary>"
        f"{_html.long_text(text, '')}</details>"
    )


class _Requests:
    """Each turn's request as what is new since the previous turn's, turn by turn in order.

    It keeps which history messages the page has shown (and with which turn), which system
    prompts and tool lists it has shown, and the previous turn's request, so each turn costs
    what is new in it, not the length of the history it was sent.
    """

    def __init__(self, run: Run) -> None:
        self.history = run.history
        self.parts = run.request_parts
        self.shown = bytearray(len(run.history))
        """1 where a history message is on the page already."""
        self.shown_with = [0] * len(run.history)
        """The turn whose request shows each history message."""
        self.first: dict[str, int] = {}
        """The turn that showed each system prompt and tool list (by `request_parts` key)."""
        self.system_of: dict[str, tuple[str, int]] = {}
        """Each agent's last system prompt key and the turn that sent it."""
        self.previous: tuple[int, list[HistorySpan | Message]] | None = None

    def html(self, turn: Turn) -> str:
        """What `turn`'s model was sent, as HTML; the turns must come in order."""
        request = turn.request
        if request is None:
            return f"<i>{esc(_unsent(turn, 'it was recorded before thena_nb kept requests'))}</i>"
        missing = [key for key in (request.system, request.tools) if key not in self.parts]
        if missing:
            return f"<i>{esc(_unsent(turn, f'the run has no request part {missing[0]!r}'))}</i>"
        spans = [p for p in _sent.moved_spans(request) if isinstance(p, Message) or p[0] < p[1]]
        if any(not isinstance(p, Message) and p[1] > len(self.history) for p in spans):
            return f"<i>{esc(_unsent(turn, 'it refers to messages past the run history'))}</i>"
        total = sum(1 if isinstance(p, Message) else p[1] - p[0] for p in spans)
        out = [
            f'<div class="thena-saw" id="thena-req-{turn.index}"><h4>System prompt</h4>',
            self._system(turn, request.system),
            self._tools(turn, request.tools),
            f"<h4>Messages as sent ({total})</h4>",
            self._messages(turn, spans),
            f"<div>model <code>{esc(turn.model)}</code> · max_tokens {request.max_tokens}</div>",
            "</div>",
        ]
        self.previous = (turn.index, spans)
        return "".join(out)

    def _system(self, turn: Turn, key: str) -> str:
        text = self.parts[key]
        before = self.system_of.get(turn.agent)
        self.system_of[turn.agent] = (key, turn.index)
        changed = before is not None and before[0] != key
        if not text:
            note = f" (changed since turn {before[1]})" if changed and before else ""
            return f'<div class="thena-system"><i>(none){note}</i></div>'
        first = self.first.setdefault(key, turn.index)
        if first != turn.index:
            link = f'<a href="#thena-p-{esc(key)}">turn {first}</a>'
            since = f"changed since turn {before[1]}: now " if changed and before else ""
            return f'<div class="thena-ref">{since}as in {link}</div>'
        change = ""
        if changed and before:
            was, now = _html.marked(str(self.parts[before[0]]), str(text))
            change = (
                f'<div class="thena-change"><div class="thena-ref">changed since turn '
                f"{before[1]} (struck out: removed; marked: added):</div>{was}{now}</div>"
            )
        return (
            f'{change}<div class="thena-system" id="thena-p-{esc(key)}">'
            f"{_html.long_text(str(text), '')}</div>"
        )

    def _tools(self, turn: Turn, key: str) -> str:
        specs = self.parts[key] or []
        head = f"<h4>Tools ({len(specs)})</h4>"
        if not specs:
            return f"{head}<i>(none)</i>"
        first = self.first.setdefault(key, turn.index)
        if first != turn.index:
            names = ", ".join(f"<code>{esc(s.get('name'))}</code>" for s in specs[:_TOOL_NAMES])
            more = f" and {len(specs) - _TOOL_NAMES} more" if len(specs) > _TOOL_NAMES else ""
            link = f'<a href="#thena-p-{esc(key)}">turn {first}</a>'
            return f'{head}<div class="thena-ref">{names}{more}: as in {link}</div>'
        items = "".join(
            f"<details><summary><code>{esc(s.get('name'))}</code> "
            f"{esc(_short(s.get('description', ''), 120))}</summary>"
            f"{_html.long_text(json.dumps(s.get('parameters'), indent=2), '')}</details>"
            for s in specs
        )
        return f'{head}<div id="thena-p-{esc(key)}">{items}</div>'

    def _messages(self, turn: Turn, spans: list[HistorySpan | Message]) -> str:
        out: list[str] = []
        shared = 0
        if self.previous is not None:
            before, previous = self.previous
            shared = _shared(previous, spans)
            if shared:
                first = spans[0]
                what = _range("message", 0, shared)
                if not isinstance(first, Message):  # a link to where message 0 is shown
                    what = f'<a href="#thena-h-{first[0]}">{what}</a>'
                out.append(
                    f'<div class="thena-ref">{what} as in '
                    f'<a href="#thena-req-{before}">turn {before}\'s request</a></div>'
                )
        at = 0
        for part in spans:
            size = 1 if isinstance(part, Message) else part[1] - part[0]
            skip = min(size, max(0, shared - at))
            if skip < size:
                out.append(self._part(turn, part, at + skip, skip))
            at += size
        return "".join(out)

    def _part(self, turn: Turn, part: HistorySpan | Message, position: int, skip: int) -> str:
        """The messages of `part` from its `skip`-th on, which sit at `position` on in the
        request: new ones in full, ones already shown as a link to where they are."""
        if isinstance(part, Message):
            return _message_html(part, position, None, "as the history processor gave it")
        out = []
        x, stop = part[0] + skip, part[1]
        while x < stop:
            if self.shown[x]:
                y = self.shown.find(0, x, stop)
                y = stop if y < 0 else y
                count = y - x
                where = self.shown_with[x]
                out.append(
                    f'<div class="thena-ref">{_range("message", position, position + count)}: '
                    f"history {x}{'–' + str(y - 1) if count > 1 else ''}, shown with "
                    f'<a href="#thena-h-{x}">turn {where}</a></div>'
                )
            else:
                y = self.shown.find(1, x, stop)
                y = stop if y < 0 else y
                count = y - x
                for j in range(x, y):
                    out.append(_message_html(self.history[j], position + j - x, j, None))
                    self.shown_with[j] = turn.index
                self.shown[x:y] = b"\x01" * count
            position += count
            x = y
        return "".join(out)


def _shared(a: Sequence[HistorySpan | Message], b: Sequence[HistorySpan | Message]) -> int:
    """How many messages two requests (as spans) begin with in common, in a step per span."""
    count = i = j = off_a = off_b = 0
    while i < len(a) and j < len(b):
        pa, pb = a[i], b[j]
        if isinstance(pa, Message) or isinstance(pb, Message):
            if not (pa is pb or (isinstance(pa, Message) and pa == pb)):
                break
            count, i, j = count + 1, i + 1, j + 1
            continue
        xa, xb = pa[0] + off_a, pb[0] + off_b
        if xa != xb:
            break
        step = min(pa[1] - xa, pb[1] - xb)
        count, off_a, off_b = count + step, off_a + step, off_b + step
        if xa + step >= pa[1]:
            i, off_a = i + 1, 0
        if xb + step >= pb[1]:
            j, off_b = j + 1, 0
    return count


def _range(word: str, lo: int, hi: int) -> str:
    """`"message 3"` or `"messages 3–7"`: positions `lo` to `hi - 1`."""
    return f"{word} {lo}" if hi - lo == 1 else f"{word}s {lo}–{hi - 1}"


def _message_html(m: Message, position: int, index: int | None, note: str | None) -> str:
    who = f"{position} · {m.role}" + (f" · {m.agent}" if m.agent else "")
    if m.tool_call_id:
        who += f" · result of {m.tool_call_id}" + (" (error)" if m.is_error else "")
    if note:
        who += f" · {note}"
    calls = "".join(
        f"<div>→ <code>{esc(c.name)}</code> "
        f"{esc(_short(json.dumps(c.arguments, ensure_ascii=False, default=str), 200))}</div>"
        for c in m.tool_calls
    )
    body = _html.long_text(m.content, "") if m.content else "<i>(no text)</i>"
    anchor = "" if index is None else f' id="thena-h-{index}"'
    return (
        f'<div class="thena-entry msg-{esc(m.role)}"{anchor}><b>{esc(who)}</b> {body}{calls}</div>'
    )


def _unsent(turn: Turn, why: str) -> str:
    return f"no request shown for turn {turn.index}: {why}"


def _lean(body: str) -> str:
    """`body` without the inline style the shared views give each `<pre>` (they are shown
    in notebook outputs too): the page's stylesheet sets it once (`.thena-page pre`). Model
    text cannot hold the replaced markup, as its `<` and `"` are escaped."""
    return body.replace(f'<pre style="{_transcript.PRE_STYLE}">', "<pre>")


def _header(run: Run) -> str:
    esc = _html.escape
    status = f'<span class="thena-badge s-{esc(run.status)}">{esc(run.status)}</span>'
    loops = "".join(
        f'<div class="thena-line">loop <code>{esc(node.path)}</code>: '
        f"{esc(_svg_chart.stop_text(node))}"
        + (
            f' <span class="thena-badge r-{esc(node.stop_reason)}">{esc(node.stop_reason)}</span>'
            if node.stop_reason
            else ""
        )
        + "</div>"
        for node in run.loops
    )
    error = f'<div class="thena-bad-text">{esc(run.error)}</div>' if run.error else ""
    output = "" if run.output is None else f"<div>output: <b>{esc(_short(run.output))}</b></div>"
    return (
        f'<div class="thena-stepper-header"><b>{esc(run.workflow_name)}</b> · run '
        f"<code>{esc(run.run_id)}</code> · {status} · {esc(_html.plural(len(run.turns), 'turn'))}"
        f"<div class='thena-line'>input: {esc(_short(run.input))}</div>{output}{loops}{error}</div>"
    )


def _short(value: object, limit: int = 300) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def write_run_page(run: Run, path: str | os.PathLike[str]) -> Path:
    """Write `run_page_html(run)` to `path` (UTF-8); returns the path written.

    Raises:
        ValueError: `path` is a directory.
    """
    target = Path(path)
    if target.is_dir():
        raise ValueError(
            f"{str(target)!r} is a directory; give `to_html` a file name, e.g. "
            f"{str(target / (run.run_id + '.html'))!r}"
        )
    target.write_text(run_page_html(run), encoding="utf-8")
    return target
