"""`exp.score_chart()`: one panel per scorer, the variants side by side with their intervals.

Built on `matplotlib.figure.Figure`, never pyplot (which keeps every figure it makes) and
never `show()`: the returned figure shows itself as a PNG in Jupyter. Scorer and variant
names are user text, so every text artist is made with `parse_math=False`: a `$` in a name
is a dollar sign, not mathtext.
"""

from __future__ import annotations

import functools
import importlib
import io
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from thena_nb.experiments._summary import ScoreStats

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["score_chart"]

_COLUMNS = 3
"""Panels per row, at most."""


def score_chart(stats: Sequence[ScoreStats], variants: Sequence[str], repeats: int) -> Figure:
    """One panel per scorer: a bar per variant (its mean) with its confidence interval.

    A pass/fail scorer's panel runs from 0 to 1 (the pass rate) and marks pass@k with a
    diamond when `repeats > 1`; a numeric scorer's panel shows the mean. The bars are
    numbered from 1 in variant order, in the same colour in every panel, and the legend
    below the panels names them.

    Args:
        stats: `summarise(...)`'s statistics.
        variants: The variants, in order (one bar each, in every panel).
        repeats: The experiment's repeats (for the pass@k label).

    Returns:
        A `Figure` not registered with pyplot; with no scorers, one panel saying so.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    names = list(dict.fromkeys(s.scorer for s in stats))
    cols = 2 if len(names) == 4 else max(1, min(_COLUMNS, len(names)))
    rows = max(1, math.ceil(len(names) / cols))
    width = max(4.0, cols * (1.2 + 0.45 * len(variants)))
    height = 0.4 + 2.6 * rows + 0.25 * math.ceil(len(variants) / 2)
    fig = _chart_class()(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    if not names:
        ax = fig.add_subplot()
        ax.text(0.5, 0.5, "no scorers", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, name in zip(axes, names, strict=False):
        _draw_scorer(ax, [s for s in stats if s.scorer == name], variants, repeats)
    for ax in axes[len(names) :]:
        ax.set_axis_off()
    _legend(fig, variants)
    return fig


def _legend(fig: Figure, variants: Sequence[str]) -> None:
    from matplotlib.patches import Patch

    handles = [
        Patch(color=_colour(i), alpha=0.8, label=f"{i + 1}  {v}") for i, v in enumerate(variants)
    ]
    legend = fig.legend(handles=handles, loc="outside lower center", ncols=2 if len(variants) > 1
                        else 1, fontsize=8, frameon=False)  # fmt: skip
    for text in legend.get_texts():
        text.set_parse_math(False)


def _colour(i: int) -> str:
    return f"C{i % 10}"


def _draw_scorer(ax: Axes, stats: list[ScoreStats], variants: Sequence[str], repeats: int) -> None:
    by_variant = {s.variant: s for s in stats}
    kind = stats[0].kind
    for x, variant in enumerate(variants):
        s = by_variant.get(variant)
        if s is None or s.mean is None:
            ax.text(x, 0, "no scores", ha="center", va="bottom", fontsize=7, rotation=90)
            continue
        assert s.low is not None and s.high is not None
        below, above = max(0.0, s.mean - s.low), max(0.0, s.high - s.mean)
        ax.bar(x, s.mean, width=0.6, color=_colour(x), alpha=0.8)
        ax.errorbar(x, s.mean, yerr=[[below], [above]], color="black", capsize=4, lw=1)
        if s.pass_at_k is not None:
            ax.plot(x, s.pass_at_k, marker="D", color="black", ms=5, linestyle="none")
    ax.set_xticks(range(len(variants)), [str(x + 1) for x in range(len(variants))], fontsize=8)
    if kind == "pass_fail":
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("pass rate", parse_math=False)
    else:
        ax.set_ylabel("mean", parse_math=False)
    ax.set_title(stats[0].scorer, fontsize=10, loc="left", parse_math=False)
    ax.set_xlim(-0.6, len(variants) - 0.4)
    if any(s.pass_at_k is not None for s in stats):
        # Above the panel, right-aligned, where it hides no bar.
        ax.text(1.0, 1.02, f"\u25c6 pass@{repeats}", ha="right", va="bottom", fontsize=8,
                transform=ax.transAxes, parse_math=False)  # fmt: skip


@functools.cache
def _chart_class() -> type[Figure]:
    """`ScoreChart`, made when first needed so that matplotlib loads only with a chart."""
    from matplotlib.figure import Figure

    class ScoreChart(Figure):
        """A matplotlib `Figure` that shows itself in Jupyter (no pyplot): as inline SVG in
        the theme's text colour (readable on a dark theme), or as a PNG."""

        def _repr_png_(self) -> bytes:
            buffer = io.BytesIO()
            self.savefig(buffer, format="png", dpi=80)
            return buffer.getvalue()

        def _repr_html_(self) -> str:
            # The notebook layer's renderer (it needs matplotlib, loaded by now): looked up
            # when a chart is shown, so that importing the experiments loads neither.
            charts = importlib.import_module("thena_nb.notebook.charts")
            return str(charts.figure_svg_html(self))

    return ScoreChart
