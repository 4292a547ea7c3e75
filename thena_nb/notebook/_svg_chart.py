"""The failure chart as inline SVG: one panel per loop, coloured by the page's theme.

What `charts.failure_chart` draws with matplotlib, drawn here as SVG text with no dependency,
so that the Stepper and a run's page (`run.to_html`) show it without an image, themed by CSS
classes (`_theme.STYLE`: the background is transparent, lines and text take the theme's
colours). Each panel draws the loop's failure streak turn by turn, `max_fails`, a marker
per turn that called tools (native circle, rescued diamond; ok green, failed red), a line
on the current turn and, when asked, where a what-if condition would have stopped the loop.
Every name and text goes through `_html.escape`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from thena_nb.core.records import _html
from thena_nb.core.records.report import ReportNode
from thena_nb.core.records.types import Turn

__all__ = ["MAX_TURNS", "failure_chart_svg", "iteration_end", "stop_text"]

MAX_TURNS = 500
"""Turns a panel draws at most: a loop's last this-many (the page stays small)."""

_W = 640
_PANEL_H = 132
_LEFT, _RIGHT, _TOP, _BOTTOM = 34, 12, 26, 22

Fn = Callable[[float], float]


def failure_chart_svg(
    turns: Sequence[Turn],
    loops: Sequence[ReportNode],
    *,
    current: int | None = None,
    what_if: Sequence[int | None] | None = None,
    every_turn: bool = False,
) -> str:
    """The chart of `loops` as an `<svg>` inside `<div class="thena-chart">`.

    Args:
        turns: The run's turns; a loop node's turn indexes point into them.
        loops: The loop nodes to draw, one panel each.
        current: The turn shown now: a line marks it in the panels it ran in.
        what_if: For each loop of `loops`, the iteration after which a what-if condition
            would have stopped it (`None`: it would not have), drawn as a dashed line.
        every_turn: Also draw a hidden line on every turn (`class="now"`, `data-turn`), for
            a page whose script shows the one of the turn it shows.

    Example:
        >>> from thena_nb import Agent, Workflow, loop, until_answered
        >>> from thena_nb.models import ScriptedModel
        >>> wf = Workflow("w", [loop(steps=[Agent("A", model=ScriptedModel(["x"]))],
        ...                          until=until_answered)])
        >>> run = wf.run("go", store=False)
        >>> svg = failure_chart_svg(run.turns, run.loops, current=0)
        >>> svg.count('class="panel"'), 'class="current"' in svg
        (1, True)
    """
    if not loops:
        return '<div class="thena-chart"><i>no loops</i></div>'
    by_index = {turn.index: turn for turn in turns}
    indexes = [node.turn_indexes()[-MAX_TURNS:] for node in loops]
    marks = list(what_if) if what_if is not None else [None] * len(loops)
    panels = [
        _panel(node, [by_index[i] for i in shown if i in by_index], k, current, w)
        for k, (node, shown, w) in enumerate(zip(loops, indexes, marks, strict=True))
    ]
    if every_turn:
        panels = [
            p.replace("</g>", "") + _now_lines(loops, k, by_index) + "</g>"
            for k, p in enumerate(panels)
        ]
    height = _PANEL_H * len(loops)
    return (
        f'<div class="thena-chart"><svg xmlns="http://www.w3.org/2000/svg" role="img" '
        f'aria-label="failure chart" width="100%" viewBox="0 0 {_W} {height}" '
        f'style="max-width:{_W}px">{"".join(panels)}</svg></div>'
    )


def _panel(
    node: ReportNode, loop_turns: list[Turn], k: int, current: int | None, what_if: int | None
) -> str:
    esc = _html.escape
    y0 = k * _PANEL_H
    xs = [t.index for t in loop_turns]
    lo, hi = (min(xs), max(max(xs), min(xs) + 1)) if xs else (0, 1)
    limit = node.max_fails if node.max_fails is not None and math.isfinite(node.max_fails) else None
    top = max([t.consecutive_fails for t in loop_turns] + [limit or 0, 1])

    def px(x: float) -> float:
        return _LEFT + (x - lo + 0.5) / (hi - lo + 1) * (_W - _LEFT - _RIGHT)

    def py(y: float) -> float:
        return y0 + _PANEL_H - _BOTTOM - y / (top + 0.5) * (_PANEL_H - _TOP - _BOTTOM)

    title = node.path + (f" (its last {MAX_TURNS} turns)" if len(xs) >= MAX_TURNS else "")
    parts = [f'<g class="panel" data-loop="{esc(node.path)}">']
    parts.append(f'<text x="{_LEFT}" y="{y0 + 14}">{esc(title)}</text>')
    parts.append(
        f'<text x="{_W - _RIGHT}" y="{y0 + 14}" text-anchor="end">{esc(stop_text(node))}</text>'
    )
    parts.extend(_axes(lo, hi, top, px, py))
    if limit is not None:
        parts.append(_hline("limit", px(lo - 0.5), px(hi + 0.5), py(limit), f"max_fails {limit:g}"))
    parts.append(_streak(loop_turns, px, py))
    parts.extend(_marker(t, px(t.index), py(t.consecutive_fails)) for t in loop_turns)
    if current is not None and current in xs:
        parts.append(_vline("current", px(current), py(0), py(top + 0.4), f"turn {current}"))
    end = iteration_end(node, what_if) if what_if is not None else None
    if end is not None:
        x = px(end + 0.5)
        parts.append(_vline("what-if", x, py(0), py(top + 0.4), f"what if: after turn {end}"))
        label = f"what if: stops after iteration {what_if}"
        parts.append(f'<text class="what-if-label" x="{x + 3:.1f}" y="{py(top) + 10:.1f}">')
        parts.append(f"{esc(label)}</text>")
    parts.append("</g>")
    return "".join(parts)


def _now_lines(loops: Sequence[ReportNode], k: int, by_index: dict[int, Turn]) -> str:
    """Hidden lines, one per turn of panel `k`, that a page's script shows one at a time."""
    node = loops[k]
    indexes = [i for i in node.turn_indexes()[-MAX_TURNS:] if i in by_index]
    if not indexes:
        return ""
    lo, hi = min(indexes), max(max(indexes), min(indexes) + 1)
    span = _W - _LEFT - _RIGHT
    y1, y2 = k * _PANEL_H + _PANEL_H - _BOTTOM, k * _PANEL_H + _TOP
    out = []
    for i in indexes:
        x = _LEFT + (i - lo + 0.5) / (hi - lo + 1) * span
        out.append(
            f'<line class="now" data-turn="{i}" x1="{x:.1f}" y1="{y1}" x2="{x:.1f}" y2="{y2}"/>'
        )
    return "".join(out)


def _axes(lo: int, hi: int, top: float, px: Fn, py: Fn) -> list[str]:
    out = [
        f'<line class="axis" x1="{px(lo - 0.5):.1f}" y1="{py(0):.1f}" '
        f'x2="{px(hi + 0.5):.1f}" y2="{py(0):.1f}"/>',
        f'<line class="axis" x1="{px(lo - 0.5):.1f}" y1="{py(0):.1f}" '
        f'x2="{px(lo - 0.5):.1f}" y2="{py(top + 0.4):.1f}"/>',
    ]
    for y in _ticks(0, math.ceil(top), 4):
        out.append(f'<text x="{_LEFT - 4}" y="{py(y) + 4:.1f}" text-anchor="end">{y}</text>')
    for x in _ticks(lo, hi, 8):
        out.append(f'<text x="{px(x):.1f}" y="{py(0) + 14:.1f}" text-anchor="middle">{x}</text>')
    return out


def _ticks(lo: int, hi: int, most: int) -> list[int]:
    """Whole-number ticks from `lo` to `hi`, at most about `most` of them."""
    step = max(1, math.ceil((hi - lo + 1) / most))
    return list(range(lo, hi + 1, step))


def _streak(loop_turns: list[Turn], px: Fn, py: Fn) -> str:
    if not loop_turns:
        return ""
    points: list[str] = []
    for t in loop_turns:
        x, y = px(t.index), py(t.consecutive_fails)
        if points:
            points.append(f"{x:.1f},{points[-1].split(',')[1]}")
        points.append(f"{x:.1f},{y:.1f}")
    return f'<polyline class="streak" points="{" ".join(points)}"/>'


def _marker(turn: Turn, x: float, y: float) -> str:
    info = turn.info
    if not info.called_tool:
        return ""
    outcome = "failed" if info.tool_error else "ok"
    source = info.tool_call_source or "native"
    tip = f"<title>turn {turn.index}: {_html.escape(info.tool_name)} {source} {outcome}</title>"
    if source == "rescued":
        d = f"M{x:.1f},{y - 5:.1f} L{x + 5:.1f},{y:.1f} L{x:.1f},{y + 5:.1f} L{x - 5:.1f},{y:.1f}Z"
        return f'<path class="m-{outcome} m-rescued" d="{d}">{tip}</path>'
    return f'<circle class="m-{outcome}" cx="{x:.1f}" cy="{y:.1f}" r="4">{tip}</circle>'


def _hline(cls: str, x1: float, x2: float, y: float, tip: str) -> str:
    return (
        f'<line class="{cls}" x1="{x1:.1f}" y1="{y:.1f}" x2="{x2:.1f}" y2="{y:.1f}">'
        f"<title>{_html.escape(tip)}</title></line>"
    )


def _vline(cls: str, x: float, y1: float, y2: float, tip: str) -> str:
    return (
        f'<line class="{cls}" x1="{x:.1f}" y1="{y1:.1f}" x2="{x:.1f}" y2="{y2:.1f}">'
        f"<title>{_html.escape(tip)}</title></line>"
    )


def iteration_end(node: ReportNode, iteration: int) -> int | None:
    """The index of the last turn of the loop's `iteration`, or `None` if it has none."""
    ends = [
        max(child.turn_indexes())
        for child in node.children
        if child.iteration == iteration and child.turn_indexes()
    ]
    return max(ends) if ends else None


def stop_text(node: ReportNode) -> str:
    """Why and when a loop stopped, e.g. `stopped: fails after 3/10 iterations`."""
    iterations = f"{node.iterations}"
    if node.max_iterations is not None:
        iterations += f"/{node.max_iterations}"
    word = "iteration" if node.iterations == 1 else "iterations"
    if node.stop_reason is not None:
        return f"stopped: {node.stop_reason} after {iterations} {word}"
    if node.error is not None:
        return f"ended by an error after {iterations} {word}"
    return f"running: {iterations} {word}"
