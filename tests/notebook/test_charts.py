"""The failure chart, checked through its artists (lines, markers, texts), not pixels."""

from __future__ import annotations

import base64
import math
import sys
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from nb_records import build_loop, streak_turns

from thena_nb.notebook.charts import (
    MARKER_LABELS,
    STREAK_LABEL,
    THRESHOLD_LABEL,
    failure_chart,
    figure_png,
    figure_png_b64,
)


def values(data: Any) -> list[float]:
    return [float(v) for v in np.asarray(data)]


def line(ax: Axes, label: str) -> Line2D | None:
    found = [artist for artist in ax.get_lines() if artist.get_label() == label]
    assert len(found) <= 1
    return found[0] if found else None


def marker_counts(ax: Axes) -> dict[str, int]:
    counts = {}
    for label in MARKER_LABELS.values():
        artist = line(ax, label)
        counts[label] = 0 if artist is None else len(values(artist.get_xdata()))
    return counts


def texts(ax: Axes) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_one_loop_gives_one_axes_with_streak_threshold_markers_and_stop_reason() -> None:
    turns = streak_turns("nNNr.RRnN")
    loop = build_loop("wf/0.loop", list(range(len(turns))), stop_reason="exhausted", max_fails=3)
    fig = failure_chart(turns, [loop])
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    streak = line(ax, STREAK_LABEL)
    assert streak is not None
    assert values(streak.get_xdata()) == list(range(9))
    assert values(streak.get_ydata()) == [0, 1, 2, 0, 0, 1, 2, 0, 1]
    assert streak.get_drawstyle().startswith("steps")
    threshold = line(ax, THRESHOLD_LABEL)
    assert threshold is not None
    assert values(threshold.get_ydata()) == [3, 3]
    assert marker_counts(ax) == {
        "native ok": 2,
        "native failed": 3,
        "rescued ok": 1,
        "rescued failed": 2,
    }
    failed = line(ax, "native failed")
    assert failed is not None
    assert values(failed.get_xdata()) == [1, 2, 8]
    assert values(failed.get_ydata()) == [1, 2, 1]
    assert any("exhausted" in t for t in texts(ax))


def test_each_loop_gets_its_own_axes_over_its_own_turns() -> None:
    turns = streak_turns("nNN") + streak_turns("..rR", start=3)
    loops = [
        build_loop("wf/0.loop", [0, 1, 2], stop_reason="fails", max_fails=2),
        build_loop("wf/1.loop", [3, 4, 5, 6], stop_reason="until", max_fails=math.inf),
    ]
    fig = failure_chart(turns, loops)
    first, second = fig.axes
    first_streak = line(first, STREAK_LABEL)
    second_streak = line(second, STREAK_LABEL)
    assert first_streak is not None and second_streak is not None
    assert values(first_streak.get_ydata()) == [0, 1, 2]
    assert values(second_streak.get_xdata()) == [3, 4, 5, 6]
    assert values(second_streak.get_ydata()) == [0, 0, 0, 1]
    assert line(first, THRESHOLD_LABEL) is not None
    # max_fails = inf: no threshold line.
    assert line(second, THRESHOLD_LABEL) is None
    assert any("fails" in t for t in texts(first))
    assert any("until" in t for t in texts(second))
    assert first.get_title(loc="left") == "wf/0.loop"
    assert marker_counts(second) == {
        "native ok": 0,
        "native failed": 0,
        "rescued ok": 1,
        "rescued failed": 1,
    }


def test_a_loop_ended_by_an_error_says_so() -> None:
    turns = streak_turns("N")
    loop = build_loop("wf/0.loop", [0], stop_reason=None, error="ValueError: boom")
    (ax,) = failure_chart(turns, [loop]).axes
    assert any("error" in t for t in texts(ax))


def test_turns_not_numbered_from_zero_are_found_by_index() -> None:
    turns = streak_turns("NN", start=5)
    loop = build_loop("wf/0.loop", [5, 6])
    (ax,) = failure_chart(turns, [loop]).axes
    streak = line(ax, STREAK_LABEL)
    assert streak is not None
    assert values(streak.get_ydata()) == [1, 2]


def test_a_run_without_loops_says_no_loops() -> None:
    fig = failure_chart(streak_turns("n."), [])
    (ax,) = fig.axes
    assert texts(ax) == ["no loops"]


def test_the_chart_renders_headless_and_leaves_pyplot_alone() -> None:
    pyplot_loaded = "matplotlib.pyplot" in sys.modules
    turns = streak_turns("nNrR.")
    fig = failure_chart(turns, [build_loop("wf/0.loop", list(range(5)))])
    png = base64.b64decode(figure_png_b64(fig))
    assert png.startswith(b"\x89PNG")
    # Built without pyplot: importing the chart module and drawing does not load it.
    assert ("matplotlib.pyplot" in sys.modules) == pyplot_loaded


def test_every_png_of_a_figure_comes_from_figure_png() -> None:
    fig = failure_chart(streak_turns("nN."), [build_loop("wf/0.loop", [0, 1, 2])])
    assert figure_png(fig).startswith(b"\x89PNG")
    png = figure_png(fig)  # the first draw settles the constrained layout; later ones agree
    assert fig._repr_png_() == png  # type: ignore[attr-defined]
    assert base64.b64decode(figure_png_b64(fig)) == png
    assert figure_png(fig, dpi=40) != png


def test_ten_thousand_turns_chart_every_marker() -> None:
    """How fast is measured by benchmark W3 (`python -m benchmarks --only W3`), not here."""
    pattern = ("nNNrR." * 1667)[:10_000]
    turns = streak_turns(pattern)
    loop = build_loop("wf/0.loop", list(range(10_000)))
    fig = failure_chart(turns, [loop])
    (ax,) = fig.axes
    assert sum(marker_counts(ax).values()) == 10_000 - pattern.count(".")


def test_a_one_turn_loop_gets_whole_number_ticks() -> None:
    from thena_nb import Agent, Workflow, loop, until_answered
    from thena_nb.models import ScriptedModel

    agent = Agent("A", model=ScriptedModel(["x"]))
    run = Workflow("w", [loop(steps=[agent], until=until_answered)]).run("go", store=False)
    fig = run.failure_chart()
    fig.canvas.draw()
    ticks = [float(t) for t in fig.axes[0].get_xticks()]
    assert ticks and all(t.is_integer() for t in ticks)
    assert "after 1/10 iteration" in fig.axes[0].texts[0].get_text()
    assert "iterations" not in fig.axes[0].texts[0].get_text()


def test_a_name_with_dollar_signs_is_drawn_as_plain_text() -> None:
    from thena_nb import Agent, Workflow, loop, until_answered
    from thena_nb.models import ScriptedModel

    agent = Agent("A", model=ScriptedModel(["x"]))
    wf = Workflow(r"cost $\notacommand$ of $x^$", [loop(steps=[agent], until=until_answered)])
    run = wf.run("go", store=False)
    png = figure_png(run.failure_chart())  # mathtext would raise ValueError while drawing
    assert png.startswith(b"\x89PNG")
    assert r"cost $\notacommand$ of $x^$" in run._repr_html_()
