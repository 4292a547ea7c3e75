"""What a run shows in a notebook: the core's HTML view with the notebook layer's frame and chart.

`run_html` is what `Run._repr_html_` calls. The turn table comes from `frames.frame_html` and
the failure chart from `charts.failure_chart` when pandas and matplotlib can be imported; without
them the core's standard-library view is shown as it is. Importing this module loads neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thena_nb.core import _html

if TYPE_CHECKING:
    from thena_nb.core.run import Run

__all__ = ["run_html"]


def run_html(run: Run) -> str:
    """The full HTML of a run: status, loops, usage, the turn frame and the failure chart.

    Args:
        run: A `Run`, finished or not.

    Returns:
        HTML text; every piece of model, tool or user text in it is escaped.
    """
    try:
        from thena_nb.notebook.charts import failure_chart, figure_png_b64
        from thena_nb.notebook.frames import frame_html, turn_frame
    except ImportError:  # pandas or matplotlib missing: the stdlib view only
        return _html.run_html(run)
    chart = figure_png_b64(failure_chart(run.turns, run.loops)) if run.loops else None
    return _html.run_html(run, frame_html=frame_html(turn_frame(run.turns)), chart_png_b64=chart)
