"""`display.run_html`: a run's full notebook HTML, with and without pandas and matplotlib."""

from __future__ import annotations

import re
import sys

import pytest
from nb_records import HOSTILE

from thena_nb import Agent, Run, Workflow, loop, tool, until_answered
from thena_nb.core.records import _html
from thena_nb.models import ScriptedModel, reply
from thena_nb.notebook.display import padded_tables, run_html
from thena_nb.notebook.frames import frame_html, turn_frame

IMG = re.compile(r'<img alt="failure chart" src="data:image/png;base64,([A-Za-z0-9+/=]+)"/>')
SVG = re.compile(r'<div class="thena-figure" style="color:var\(--jp-ui-font-color1[^"]*"><svg ')


@tool
def search(q: str) -> str:
    """Search the notes."""
    return HOSTILE


def hostile_run(*, looped: bool = True) -> Run:
    """A tool call then a hostile answer in a loop, or only the answer without one."""
    replies = [reply.tool("search", q=HOSTILE), HOSTILE] if looped else [HOSTILE]
    agent = Agent("Finder", model=ScriptedModel(replies), tools=[search])
    step = loop(steps=[agent], until=until_answered) if looped else agent
    return Workflow("wf", [step]).run(HOSTILE)


def assert_escaped(text: str) -> None:
    assert "<script" not in text.lower()
    assert "<img src=x" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_run_html_holds_the_frame_and_the_failure_chart() -> None:
    run = hostile_run()
    text = run_html(run)
    assert_escaped(text)
    assert padded_tables(frame_html(turn_frame(run.turns))) in text
    assert len(SVG.findall(text)) == 1 and IMG.search(text) is None
    assert "wf/0.loop" in text and "until" in text


def test_every_table_cell_is_padded_inline_for_pages_without_jupyters_css() -> None:
    """Outside Jupyter (GitHub, nbviewer, an exported page) no stylesheet pads the cells."""
    text = run_html(hostile_run())
    cells = re.findall(r"<t[dh](?: [^>]*)?>", text)
    assert len(cells) > 10
    assert all('style="padding:2px 8px;' in cell for cell in cells), cells
    assert all("border-collapse" in t for t in re.findall(r"<table[^>]*>", text))


def test_it_is_what_a_run_shows_in_a_notebook() -> None:
    for run in (hostile_run(), hostile_run(looped=False)):
        assert run._repr_html_() == run_html(run)


def test_a_run_without_loops_has_the_frame_and_no_chart() -> None:
    run = hostile_run(looped=False)
    text = run_html(run)
    assert_escaped(text)
    assert 'class="thena-frame"' in text
    assert IMG.search(text) is None and SVG.search(text) is None


@pytest.mark.parametrize("missing", ["thena_nb.notebook.frames", "thena_nb.notebook.charts"])
def test_without_pandas_or_matplotlib_it_is_the_core_view(
    monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    """A `None` entry in `sys.modules` makes the import fail as a missing dependency does."""
    run = hostile_run()
    monkeypatch.setitem(sys.modules, missing, None)
    text = run_html(run)
    assert text == padded_tables(_html.run_html(run))
    assert_escaped(text)
    assert 'class="thena-frame"' not in text and IMG.search(text) is None
