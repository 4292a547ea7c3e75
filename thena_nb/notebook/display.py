"""What a run shows in a notebook: the core's HTML view with the notebook layer's frame and chart.

`run_html` is what `Run._repr_html_` calls. The turn table comes from `frames.frame_html` and
the failure chart from `charts.failure_chart` (inline SVG in the theme's text colour) when
pandas and matplotlib can be imported; without them the core's standard-library view is shown
as it is. Importing this module loads neither. Its tables carry their cell padding inline, so
they read the same where Jupyter's stylesheet is absent (a saved notebook on GitHub, nbviewer,
an exported page).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from thena_nb.core.records import _html

if TYPE_CHECKING:
    from thena_nb.core.runs.run import Run

__all__ = ["padded_tables", "run_html"]

_CELL = re.compile(r'<(td|th)( style="([^"]*)")?>')
_TABLE = re.compile(r"<table(?![^>]*\bstyle=)")
_CELL_STYLE = "padding:2px 8px;text-align:left;vertical-align:top"


def run_html(run: Run) -> str:
    """The full HTML of a run: status, loops, usage, the turn frame and the failure chart.

    Args:
        run: A `Run`, finished or not.

    Returns:
        HTML text; every piece of model, tool or user text in it is escaped.
    """
    try:
        from thena_nb.notebook.charts import failure_chart, figure_svg_html
        from thena_nb.notebook.frames import frame_html, turn_frame
    except ImportError:  # pandas or matplotlib missing: the stdlib view only
        return padded_tables(_html.run_html(run))
    text = padded_tables(_html.run_html(run, frame_html=frame_html(turn_frame(run.turns))))
    if not run.loops:
        return text
    assert text.endswith("</div>"), text[-40:]  # the run's box: the chart goes last in it
    chart = figure_svg_html(failure_chart(run.turns, run.loops))
    return f"{text[: -len('</div>')]}{chart}</div>"


def padded_tables(text: str) -> str:
    """`text` with every table cell padded and left-aligned by an inline style (a cell's
    own style comes after, so it wins), and tables collapsed: what Jupyter's stylesheet
    gives a table, kept where that stylesheet is absent.

    Model text in `text` is escaped, so every `<td>` and `<th>` in it is markup.

    Example:
        >>> padded_tables('<table><tr><th>a</th><td style="color:red">1</td></tr></table>')
        '<table style="border-collapse:collapse"><tr><th style="padding:2px 8px;text-align:left;vertical-align:top">a</th><td style="padding:2px 8px;text-align:left;vertical-align:top;color:red">1</td></tr></table>'
    """  # noqa: E501
    text = _TABLE.sub('<table style="border-collapse:collapse"', text)
    return _CELL.sub(lambda m: f'<{m[1]} style="{_CELL_STYLE}{";" + m[3] if m[3] else ""}">', text)
