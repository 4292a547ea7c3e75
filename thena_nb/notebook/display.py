"""What the core's views need from the notebook layer: a run's full HTML."""

from __future__ import annotations

from typing import TYPE_CHECKING

from thena_nb.core import _html

if TYPE_CHECKING:
    from thena_nb.core.run import Run

__all__ = ["run_html"]


def run_html(run: Run) -> str:
    """The HTML of a run: with its turn table and failure chart when pandas and matplotlib
    are installed, the standard-library view otherwise."""
    try:
        from thena_nb.notebook.charts import failure_chart, figure_png_b64
        from thena_nb.notebook.frames import frame_html, turn_frame
    except ImportError:  # pandas or matplotlib missing: the stdlib view only
        return _html.run_html(run)
    chart = figure_png_b64(failure_chart(run.turns, run.loops)) if run.loops else None
    return _html.run_html(run, frame_html=frame_html(turn_frame(run.turns)), chart_png_b64=chart)
