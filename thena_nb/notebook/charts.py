"""The failure-streak chart: one panel per loop, built on `matplotlib.figure.Figure`.

`failure_chart` backs `Run.failure_chart()`. It never touches pyplot (which keeps global
references to every figure) and never calls `show()`; the notebook displays the returned
`Figure`. `figure_png` is the one place a figure becomes PNG bytes (the Figure's own
`_repr_png_`, the Stepper's chart); `figure_svg_html` is the one place it becomes inline SVG
that takes the notebook's text colour (the Figure's `_repr_html_`, which JupyterLab prefers,
and a run's HTML view), so that a chart reads on a dark theme as on a light one.
"""

from __future__ import annotations

import base64
import io
import math
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from matplotlib import rc_context
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from thena_nb.notebook._svg_chart import stop_text

if TYPE_CHECKING:
    from thena_nb.core.records.report import ReportNode
    from thena_nb.core.records.types import Turn

__all__ = [
    "MARKER_LABELS",
    "STREAK_LABEL",
    "THRESHOLD_LABEL",
    "failure_chart",
    "figure_png",
    "figure_png_b64",
    "figure_svg_html",
    "plain_text",
]

MARKER_LABELS: dict[tuple[str, bool], str] = {
    ("native", True): "native ok",
    ("native", False): "native failed",
    ("rescued", True): "rescued ok",
    ("rescued", False): "rescued failed",
}
"""The label of the marker artist for each (tool call source, worked) pair."""

_MARKER_STYLE: dict[tuple[str, bool], tuple[str, str]] = {
    ("native", True): ("o", "tab:green"),
    ("native", False): ("o", "tab:red"),
    ("rescued", True): ("D", "tab:olive"),
    ("rescued", False): ("D", "tab:purple"),
}
STREAK_LABEL = "failure streak"
"""The label of each panel's step line."""
THRESHOLD_LABEL = "max_fails"
"""The label of each panel's threshold line."""


class FailureChart(Figure):
    """A matplotlib `Figure` that shows itself in Jupyter with no pyplot and no
    `%matplotlib inline` needed: as inline SVG in the theme's colours, or as a PNG where
    HTML is not shown."""

    def _repr_png_(self) -> bytes:
        return figure_png(self)

    def _repr_html_(self) -> str:
        return figure_svg_html(self)


def failure_chart(turns: Sequence[Turn], loops: Sequence[ReportNode]) -> Figure:
    """One panel per loop: its failure streak turn by turn, the threshold and its stop reason.

    Each panel draws the loop's `consecutive_fails` after each of its turns as a step line,
    `max_fails` as a horizontal line (left out when it is `inf`), one marker per turn that
    called tools (labelled by `MARKER_LABELS`: native or rescued, working or failed), and
    the loop's stop reason as text.

    Args:
        turns: The run's turns (`run.turns`); a loop node's turn indexes point into them.
        loops: The run's loop nodes (`run.loops`), one panel each.

    Returns:
        A `Figure` not registered with pyplot; with no loops, one panel saying "no loops".
    """
    fig = FailureChart(figsize=(8.0, 0.6 + 2.2 * max(1, len(loops))), layout="constrained")
    FigureCanvasAgg(fig)
    if not loops:
        ax = fig.add_subplot()
        ax.text(0.5, 0.5, "no loops", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    axes = fig.subplots(len(loops), 1, squeeze=False)[:, 0]
    by_index = _by_index(turns)
    for ax, loop_node in zip(axes, loops, strict=True):
        _draw_loop(ax, loop_node, [by_index(i) for i in loop_node.turn_indexes()])
    axes[-1].set_xlabel("turn")
    return fig


def figure_png(fig: Figure, *, dpi: int = 80) -> bytes:
    """The figure rendered as PNG bytes: the one figure-to-PNG helper of the notebook layer.

    Args:
        fig: A figure, e.g. from `failure_chart`.
        dpi: Resolution of the PNG.

    Returns:
        The PNG file's bytes.
    """
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def figure_png_b64(fig: Figure, *, dpi: int = 80) -> str:
    """`figure_png` as base64 text, for an `<img src="data:image/png;base64,…">`.

    Args:
        fig: A figure, e.g. from `failure_chart`.
        dpi: Resolution of the PNG.

    Returns:
        The PNG bytes, base64-encoded as ASCII text.
    """
    return base64.b64encode(figure_png(fig, dpi=dpi)).decode("ascii")


_INK = "#000000"
"""What matplotlib draws text, axes and ticks in by default: the SVG takes the page's
text colour there instead."""
_TEXT_COLOUR = "var(--jp-ui-font-color1, var(--vscode-editor-foreground, #1a1a1a))"
_XML_HEAD = re.compile(r"\A.*?(?=<svg)", re.DOTALL)


def figure_svg_html(fig: Figure) -> str:
    """The figure as inline SVG on a transparent background, its black (text, axes, ticks,
    error bars) drawn in the notebook's text colour: light on a dark JupyterLab or VS Code
    theme, dark on a light one. Coloured lines and markers keep their colours.

    Args:
        fig: A figure, e.g. from `failure_chart`.

    Returns:
        A `<div>` holding the `<svg>`; text in it is drawn as paths (no font needed).
    """
    buffer = io.StringIO()
    # A fixed salt makes the ids the same on every save (a re-run notebook's output does
    # not change); two charts on a page share an id only for the same definition.
    with rc_context({"svg.hashsalt": "thena_nb"}):
        fig.savefig(buffer, format="svg", transparent=True, metadata={"Date": None})
    svg = _XML_HEAD.sub("", buffer.getvalue(), count=1)
    svg = svg.replace(_INK, "currentColor")
    # Text glyphs carry no fill of their own (black by default): they take the root's.
    svg = svg.replace("<svg ", '<svg fill="currentColor" style="max-width:100%;height:auto" ', 1)
    return f'<div class="thena-figure" style="color:{_TEXT_COLOUR}">{svg}</div>'


def _by_index(turns: Sequence[Turn]) -> Callable[[int], Turn]:
    if all(turn.index == position for position, turn in enumerate(turns)):
        return turns.__getitem__
    table = {turn.index: turn for turn in turns}
    return table.__getitem__


def _draw_loop(ax: Axes, loop_node: ReportNode, loop_turns: list[Turn]) -> None:
    xs = [turn.index for turn in loop_turns]
    streak = [turn.consecutive_fails for turn in loop_turns]
    ax.step(xs, streak, where="post", color="tab:blue", linewidth=1.2, label=STREAK_LABEL)
    max_fails = loop_node.max_fails
    if max_fails is not None and not math.isinf(max_fails):
        ax.axhline(max_fails, color="tab:red", linestyle="--", linewidth=1, label=THRESHOLD_LABEL)
    points: dict[tuple[str, bool], tuple[list[int], list[int]]] = {}
    for turn in loop_turns:
        info = turn.info
        if not info.called_tool:
            continue
        key: tuple[str, bool] = (info.tool_call_source or "native", not info.tool_error)
        x_list, y_list = points.setdefault(key, ([], []))
        x_list.append(turn.index)
        y_list.append(turn.consecutive_fails)
    for key, label in MARKER_LABELS.items():
        if key not in points:
            continue
        marker, color = _MARKER_STYLE[key]
        x_list, y_list = points[key]
        ax.plot(x_list, y_list, linestyle="none", marker=marker, color=color, ms=4, label=label)
    top: float = max(streak, default=0)
    if max_fails is not None and not math.isinf(max_fails):
        top = max(top, max_fails)
    ax.set_ylim(-0.3, max(top, 1) + 0.7)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if xs:  # at least one turn either side, so that a short loop gets whole-number ticks
        ax.set_xlim(min(xs) - 0.5, max(max(xs), min(xs) + 1) + 0.5)
    ax.set_title(plain_text(loop_node.path), fontsize=9, loc="left")
    ax.set_ylabel("consecutive fails")
    # Above the panel, right-aligned, so it never hides a point; a text artist in `ax.texts`.
    ax.text(
        1.0,
        1.02,
        stop_text(loop_node),
        ha="right",
        va="bottom",
        fontsize=9,
        transform=ax.transAxes,
    )
    if not loop_turns:
        ax.text(0.5, 0.5, "no turns", ha="center", va="center", transform=ax.transAxes)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)


def plain_text(text: str) -> str:
    """`text` as matplotlib draws it literally: a `$` would start mathtext, which fails on
    (or mangles) names and model text."""
    return text.replace("$", r"\$")
