"""A run as one self-contained HTML page: `run.to_html(path)`.

The page holds the run's header, the transcript, one inspector per turn, the turn table and
the failure chart as inline SVG, styled by `_theme.STYLE` (light, or dark when the browser
asks). A few lines of inline script step back and forward over the turns and switch the
inspector's tabs. Nothing is fetched: no CDN, no font, no image from elsewhere, no kernel.
The page's Content-Security-Policy allows no network at all and only its own script (by
hash), so no script in model text could run even if escaping failed; every text is escaped
through `_html.escape` anyway.
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

from thena_nb.core import _html
from thena_nb.core.run import Run
from thena_nb.notebook import _svg_chart, _theme, _transcript

__all__ = ["SCRIPT", "run_page_html", "write_run_page"]

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
    var tab = ev.target.closest('.thena-tab');
    if (tab) { document.body.setAttribute('data-tab', tab.getAttribute('data-tab')); return; }
    var entry = ev.target.closest('.thena-entry.turn, .thena-frame tr[data-turn]');
    if (entry) show(parseInt(entry.getAttribute('data-turn'), 10));
  });
  document.body.setAttribute('data-tab', '0');
  show(0);
})();"""
"""The page's one script: back/forward over turns, the inspector's tabs, click to select."""

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
"""


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
        f"<style>{_theme.STYLE}{_theme.DARK_VARIABLES}{_PAGE_STYLE}</style></head>"
        f'<body class="{_theme.UI_CLASS} thena-page">{_body(run)}'
        f"<script>{SCRIPT}</script></body></html>\n"
    )


def _body(run: Run) -> str:
    n = len(run.turns)
    views = "".join(
        f'<div class="thena-turn-view" data-turn="{i}"{" hidden" if i else ""}>'
        f"{_transcript.inspector_html(run, i)}</div>"
        for i in range(n)
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
