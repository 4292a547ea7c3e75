"""The Stepper where users found it wrong: contrast, pause feedback, the empty position line,
turn and iteration labels, following the shown turn, the whole turn table, editing a
tool-calling reply, charts on a dark theme, gate schema messages and small wording."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import HeldModel, add, add_call, calc

from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.experiments._chart import score_chart
from thena_nb.experiments._summary import ScoreStats
from thena_nb.models import ScriptedModel, reply
from thena_nb.notebook import _stepper_views as views
from thena_nb.notebook import _theme, _transcript
from thena_nb.notebook._stepper_gates import schema_problems
from thena_nb.notebook.charts import failure_chart, figure_svg_html
from thena_nb.notebook.stepper import FRAME_ROWS

pytestmark = pytest.mark.anyio

# -- WCAG contrast ---------------------------------------------------------------------------

Rgba = tuple[float, float, float, float]


def parse(colour: str) -> Rgba:
    """`#rgb`, `#rrggbb`, `white`, `rgba(r,g,b,a)` as 0–255 channels and an alpha."""
    colour = colour.strip()
    if colour == "white":
        return (255, 255, 255, 1)
    if colour.startswith("rgba"):
        r, g, b, a = (float(v) for v in re.findall(r"[\d.]+", colour))
        return (r, g, b, a)
    hex_ = colour.lstrip("#")
    if len(hex_) == 3:
        hex_ = "".join(c * 2 for c in hex_)
    return (int(hex_[0:2], 16), int(hex_[2:4], 16), int(hex_[4:6], 16), 1)


def over(top: Rgba, under: Rgba) -> Rgba:
    a = top[3]
    r, g, b = (t * a + u * (1 - a) for t, u in zip(top[:3], under[:3], strict=True))
    return (r, g, b, 1)


def luminance(c: Rgba) -> float:
    def channel(v: float) -> float:
        v /= 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(v) for v in c[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(fg: str, bg: str) -> float:
    """WCAG 2 contrast of text colour `fg` (composited on `bg`) against `bg`."""
    back = parse(bg)
    front = over(parse(fg), back)
    hi, lo = sorted((luminance(front), luminance(back)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_the_contrast_helper_matches_the_issue() -> None:
    """A check of the checker: the issue measured the old red at 2.0:1 and 2.6:1."""
    assert round(contrast("#d62728", "#424242"), 1) == 2.0
    assert round(contrast("#d62728", "#303030"), 1) == 2.6
    assert round(contrast("#000000", "#ffffff"), 0) == 21


def lab_theme(name: str) -> dict[str, str]:
    """The variables of an installed JupyterLab theme (`light` or `dark`), resolved."""
    found = list(Path(pytest.__file__).parents[3].glob(f"**/theme-{name}-extension/index.css"))
    assert found, "JupyterLab's themes are not installed: install the dev extra (jupyterlab)"
    text = found[0].read_text()
    values = dict(re.findall(r"(--jp-[\w-]+):([^;}]+)", text))

    def resolve(value: str) -> str:
        m = re.fullmatch(r"var\((--[\w-]+),?([^)]*)\)", value.strip())
        return resolve(values.get(m[1]) or m[2]) if m else value.strip()

    return {k: resolve(v) for k, v in values.items()}


THEMES = {
    # text colours of the theme, backgrounds text sits on (page, code, output area)
    "light": (_theme.LIGHT_TEXT, "--jp-ui-font-color1", ("--jp-layout-color1", "--jp-layout-color2")),
    "dark": (_theme.DARK_TEXT, "--jp-ui-font-color1", ("--jp-layout-color0", "--jp-layout-color1", "--jp-layout-color2")),
}  # fmt: skip


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_text_colour_meets_aa_on_every_background_of_jupyterlabs_theme(theme: str) -> None:
    texts, fg_var, bg_vars = THEMES[theme]
    lab = lab_theme(theme)
    backgrounds = [lab[v] for v in bg_vars]
    colours = {**texts, "fg": lab[fg_var]}
    low = {
        (name, bg): round(contrast(fg, bg), 2)
        for name, fg in colours.items()
        for bg in backgrounds
        if contrast(fg, bg) < 4.5
    }
    assert low == {}
    assert set(texts) == {"bad", "ok", "warn", "muted"}


def test_the_dark_page_colours_meet_aa() -> None:
    """A run's page in the browser's dark mode: its own dark variables and backgrounds."""
    dark = dict(re.findall(r"(--[\w-]+): (#[0-9a-f]{6})", _theme.DARK_VARIABLES))
    for name in ("bad", "ok", "warn", "muted"):
        for bg in (dark["--jp-layout-color1"], dark["--jp-layout-color2"]):
            assert contrast(dark[f"--thena-{name}"], bg) >= 4.5, (name, bg)
    assert contrast(dark["--jp-ui-font-color1"], dark["--jp-layout-color2"]) >= 4.5


def test_badges_are_white_on_fills_of_aa_contrast() -> None:
    fills = set(re.findall(r"\.thena-badge[^{]*\{[^}]*background: (#[0-9a-f]{6})", _theme.STYLE))
    assert len(fills) >= 6
    assert {
        f: round(contrast("#ffffff", f), 2) for f in fills if contrast("#ffffff", f) < 4.5
    } == {}


def test_the_theme_picks_the_dark_texts_and_overrides_the_cores_fixed_colours() -> None:
    style = _theme.STYLE
    dark = ", ".join(_theme.DARK_SELECTORS)
    assert f"{dark} {{ --thena-bad: {_theme.DARK_TEXT['bad']};" in style
    assert f"--thena-bad: {_theme.LIGHT_TEXT['bad']};" in style
    assert '.thena-ui [style*="color:#d62728"] { color: var(--thena-bad) !important; }' in style
    assert "--jp-error-color1" not in style.split("}")[0]  # JupyterLab's red is not used


async def test_error_text_in_the_reply_and_tools_tabs_takes_the_theme_red() -> None:
    @tool
    def boom() -> str:
        """Fail."""
        raise ValueError("no <luck>")

    agent = Agent("A", model=ScriptedModel([reply.tool("boom"), "ok"]), tools=[boom])
    stepper = Workflow("w", [loop(steps=[agent], until=until_answered)]).stepper("go")
    await stepper.step()
    # the Reply tab: the core's error <pre> carries the red the theme overrides
    pattern = r'<pre style="[^"]*color:#d62728">Error: tool &#x27;boom'
    assert re.search(pattern, stepper.turn_html.value)
    stepper.inspector.selected_index = 3
    tools = stepper.tools_html.value
    assert "<div class='thena-bad-text'><pre" in tools and "no &lt;luck&gt;" in tools
    assert "#d62728" not in views.would_stop_html("u", ValueError("x"))
    assert "style" not in views.error_html("oops")


# -- pause, the empty position line ----------------------------------------------------------


async def test_pause_says_pausing_at_once_then_paused_before_tools() -> None:
    model = HeldModel([add_call(), "done"], hold_at=1)  # answers once the test releases it
    agent = Agent("Calc", model=model, tools=[add])
    stepper = Workflow("w", [loop(steps=[agent], until=until_answered)]).stepper("go")
    task = stepper.run()
    await asyncio.wait_for(model.held.wait(), 10)
    assert stepper.position_html.value == views.EMPTY_RUNNING  # not "no turns yet"
    stepper.pause_button.click()
    assert stepper.status == "pausing" and stepper.pause_button.disabled
    assert "pausing…" in stepper.header.value
    assert "the model call in flight finishes" in stepper.header.value
    model.release.set()
    await asyncio.wait_for(task, 10)
    assert stepper.status == "paused" and stepper.session.paused_at == "tools"
    assert "paused before tools — Continue runs them" in stepper.header.value
    assert "pausing" not in stepper.header.value
    assert stepper.position_html.value == views.EMPTY_PAUSED_TOOLS
    assert not stepper.continue_button.disabled
    stepper.continue_button.click()
    assert stepper.task is not None
    await asyncio.wait_for(stepper.task, 10)
    assert stepper.status == "finished" and stepper.turn_count == 2
    assert stepper.session.result.turns[0].tool_calls[0].result == "2"


async def test_the_empty_position_line_says_when_a_gate_holds_the_first_turn() -> None:
    @tool(name="pay", gate=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        return f"paid {amount}"

    agent = Agent("Clerk", model=ScriptedModel([reply.tool("pay", amount=5), "ok"]), tools=[pay])
    stepper = Workflow("w", [agent]).stepper("go")
    assert "no turns yet" in stepper.position_html.value
    await stepper.run()
    assert stepper.position_html.value == views.EMPTY_WAITING
    assert "1 tool call waits for a decision" in stepper.header.value
    assert "paused before tools" not in stepper.header.value  # the gate's words say it


# -- labels --------------------------------------------------------------------------------


async def test_turns_and_iterations_are_labelled_so_they_cannot_be_mixed_up() -> None:
    wf = Workflow("w", [loop(steps=[calc([add_call()] * 3 + ["done"])], until=until_answered)])
    stepper = wf.stepper("go")
    await stepper.step()
    line, header = stepper.position_html.value, stepper.header.value
    assert "turn #0 (1st of 1)" in line and "ran in loop iteration 1 of 10" in line
    assert "now at iteration 2 of 10" in header  # the next turn's iteration, named as such
    assert 'data-turn="0" title="w/0.loop/0.Calc"><div>turn #0 ·' in stepper.transcript_html.value
    assert [views.ordinal(n) for n in (1, 2, 3, 11, 21, 112)] == [
        "1st", "2nd", "3rd", "11th", "21st", "112th"
    ]  # fmt: skip


# -- the transcript follows the shown turn; the table lists every turn --------------------------


async def test_the_transcript_ends_at_the_shown_turn_and_opens_at_its_end() -> None:
    wf = Workflow("w", [loop(steps=[calc([add_call()] * 5 + ["done"])], until=until_answered)])
    stepper = wf.stepper("go")
    await stepper.run()
    html = stepper.transcript_html.value
    assert html.startswith('<div class="thena-transcript thena-follow"><div>')
    entries = re.findall(r'class="thena-entry turn( current)?" data-turn="(\d+)"', html)
    assert entries[-1] == (" current", "5") and len(entries) == 6
    stepper.show(2)
    html = stepper.transcript_html.value
    shown, later = html.split('<details class="thena-later">')
    assert re.findall(r'data-turn="(\d+)"', shown) == ["0", "1", "2"]
    assert "3 later turns (after the one shown)" in later
    assert re.findall(r'data-turn="(\d+)"', later) == ["3", "4", "5"]
    assert ".thena-transcript.thena-follow { display: flex; flex-direction: column-reverse; }" in (
        _theme.STYLE
    )
    page = _transcript.transcript_html(stepper.session.result, current=2)
    assert "thena-later" not in page and "thena-follow" not in page  # a page shows them all


async def test_the_turn_table_lists_every_turn_as_the_chart_draws_them() -> None:
    wf = Workflow("w", [loop(steps=[calc([add_call()] * 4 + ["done"])], until=until_answered)])
    stepper = wf.stepper("go")
    await stepper.run()
    stepper.show(0)
    table = stepper.frame_html.value
    assert table.count("<tr data-turn") + table.count('<tr class="current"') == 5
    assert "turns #0–#4 (all 5)" in table and '<tr class="current" data-turn="0">' in table
    assert views.frame_window(3, FRAME_ROWS, 5) == (0, 5)


# -- editing a tool-calling turn's reply --------------------------------------------------------


async def test_the_reply_of_a_tool_calling_turn_opens_as_json_and_says_what_an_edit_does() -> None:
    wf = Workflow("w", [loop(steps=[calc([add_call(1, 2), "3"])], until=until_answered)])
    stepper = wf.stepper("go")
    await stepper.run()
    stepper.show(0)
    assert stepper.edit_target.options[0] == ("the reply (text and tool calls)", "reply")
    prefilled = json.loads(stepper.edit_text.value)
    assert prefilled == {"text": "", "tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}
    assert "calls <code>add</code>" in stepper.edit_note.value
    stepper.edit_text.value = "just <text>"
    note = stepper.edit_note.value
    assert "The recorded tool calls (<code>add</code>) are dropped" in note
    assert "<text>" not in note
    stepper.edit_text.value = '{"text": "", "tool_calls": "nope"}'
    assert "thena-bad-text" in stepper.edit_note.value
    stepper._edit_clicked()  # the button: a malformed edit is shown, nothing forks
    assert "&quot;tool_calls&quot; must be a list" in stepper.edit_error.value
    assert not stepper.parents
    prefilled["tool_calls"][0]["arguments"] = {"a": 5, "b": 5}
    stepper.edit_text.value = json.dumps(prefilled)
    stepper._edit_clicked()
    assert stepper.task is not None
    await stepper.task
    fork = stepper.session.result
    assert fork.parent_run_id is not None
    assert fork.turns[0].tool_calls[0].arguments == {"a": 5, "b": 5}
    assert fork.turns[0].tool_calls[0].result == "10"


async def test_a_text_turn_reply_opens_as_its_text() -> None:
    stepper = Workflow("w", [calc(["plain"])]).stepper("go")
    await stepper.run()
    assert stepper.edit_text.value == "plain"
    assert "answers with this text only" in stepper.edit_note.value
    assert "dropped" not in stepper.edit_note.value


# -- charts on a dark theme ---------------------------------------------------------------------


def test_matplotlib_charts_show_as_svg_in_the_themes_text_colour() -> None:
    wf = Workflow("w", [loop(steps=[calc([add_call(), "done"])], until=until_answered)])
    run = wf.run("go", store=False)
    stats = [ScoreStats("exact", "v1", "pass_fail", 2, 0.5, 0.2, 0.8, None)]
    figures: list[Any] = [run.failure_chart(), score_chart(stats, ["v1"], 1)]
    for fig in figures:
        html = fig._repr_html_()
        assert html.startswith('<div class="thena-figure" style="color:var(--jp-ui-font-color1')
        assert '<svg fill="currentColor"' in html and "currentColor" in html
        assert "#000000" not in html and "#ffffff" not in html  # no black ink, no white paper
        assert "<?xml" not in html and "<script" not in html
        assert fig._repr_png_().startswith(b"\x89PNG")  # where HTML is not shown
    again = [figure_svg_html(failure_chart(run.turns, run.loops)) for _ in range(2)]
    assert again[0] == again[1]  # a re-run notebook gives the same output


# -- gate cards, wording ---------------------------------------------------------------------


async def test_a_gate_card_names_the_wrong_field_in_words_not_a_dict() -> None:
    @tool(gate=True)
    def fetch(url: str, retries: int = 1) -> str:
        """Fetch a page."""
        return "page"

    agent = Agent("A", model=ScriptedModel([reply.tool("fetch", url="x"), "ok"]), tools=[fetch])
    stepper = Workflow("w", [agent]).stepper("go")
    await stepper.step()
    (card,) = stepper.gate_cards.values()
    assert not card.edit({"url": 3, "retries": "<b>2</b>"})
    error = card.error.value
    assert "url must be a string; retries must be an integer" in error
    assert "do not fit tool &#x27;fetch&#x27;" in error and "still pending" in error
    assert "{&#x27;" not in error and "properties" not in error and "<b>" not in error
    assert stepper.pending_count == 1


def test_schema_problems_read_as_sentences() -> None:
    schema = {
        "type": "object",
        "properties": {
            "mode": {"enum": ["a", "b"]},
            "flag": {"type": "boolean"},
            "n": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        },
        "required": ["mode"],
    }
    assert schema_problems(schema, {"flag": 1, "n": "x"}) == [
        "mode is missing",
        "flag must be true or false",
        "n must be an integer or null",
    ]
    assert schema_problems(schema, {"mode": "a", "flag": True, "n": None}) == []
    assert schema_problems(None, {"x": 1}) == []


def test_small_wording_fixes() -> None:
    one = views.header_html("w", "paused", 0, hit=None, reason="", waiting=1)
    two = views.header_html("w", "paused", 0, hit=None, reason="", waiting=2)
    assert "1 tool call waits for a decision" in one and "2 tool calls wait for" in two


async def test_what_the_model_saw_puts_a_space_before_no_text() -> None:
    wf = Workflow(
        "w",
        [Agent("Researcher", model=ScriptedModel([""])), Agent("B", model=ScriptedModel(["b"]))],
    )
    stepper = wf.stepper("go")
    await stepper.run()
    stepper.inspector.selected_index = 1
    assert "<b>assistant · Researcher</b> <i>(no text)</i>" in stepper.saw_html.value


def test_the_scrub_row_does_not_wrap() -> None:
    stepper = Workflow("w", [calc(["x"])]).stepper("go")
    assert '["row", null, "thena-scrub", ["back_button", "slider", "forward_button"]]' in (
        stepper._esm
    )
    assert ".thena-stepper .thena-scrub { flex-wrap: nowrap;" in stepper._css
    assert ".thena-stepper .thena-range { flex: 1 1 auto; min-width: 60px;" in stepper._css
    assert stepper.parts_fixed["slider"]["kind"] == "slider"
