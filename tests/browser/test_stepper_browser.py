"""The Stepper in a real JupyterLab page: step through a run, and model text stays text."""

from __future__ import annotations

import pytest
from playwright.sync_api import Locator, Page, expect

from .lab_helpers import ARTIFACTS, Lab, open_and_run, stepper_root, write_notebook

pytestmark = pytest.mark.browser

SETUP = """
from thena_nb import Agent, Workflow, loop, tool, until_answered
from thena_nb.models import ScriptedModel, reply

@tool
def add(a: int, b: int) -> int:
    '''Add two numbers.'''
    return a + b
"""

STEP_THROUGH = """
calc = Agent("Calc", model=ScriptedModel([
    reply.tool("add", a=1, b=2),
    reply.tool("add", a=3, b=4),
    "1 + 2 + 3 + 4 = 10",
]), tools=[add])
wf = Workflow("sums", [loop(steps=[calc], until=until_answered, max_iterations=5)])
stepper = wf.stepper("What is 1 + 2 + 3 + 4?")
stepper
"""

HOSTILE = """
text = ('<script>window.__pwned = 1; document.title = "pwned"</script>'
        '<img src=x onerror="window.__pwned = 2">')
hostile = Agent("Echo", model=ScriptedModel([text]))
stepper = Workflow("hostile", [hostile]).stepper("hi")
stepper
"""

BREAK_AND_STOP = """
calc = Agent("Calc", model=ScriptedModel(
    [reply.tool("add", a=1, b=1), reply.tool("nope"), reply.tool("add", a=2, b=2), "done"]
), tools=[add])
wf = Workflow("breaks", [loop(steps=[calc], until=until_answered)])
stepper = wf.stepper("go")
stepper
"""


TITLES = {
    "Step": "Run one turn",
    "Run": "Run to the end or the next breakpoint",
    "Stop": "Stop the run",
    "Back": "Previous turn",
}


def button(page: Page, name: str) -> Locator:
    """A Stepper button, found by its tooltip (icon glyphs are part of the visible name)."""
    return page.locator(f"button[title='{TITLES[name]}']")


def test_step_three_times_shows_the_frame_and_turn_two(page: Page, lab: Lab) -> None:
    open_and_run(page, lab, write_notebook(lab, "step_through.ipynb", SETUP, STEP_THROUGH))
    stepper_root(page)
    position = page.locator(".thena-stepper-position")
    for n, nth in ((1, "1st"), (2, "2nd"), (3, "3rd")):
        button(page, "Step").click()
        expect(position).to_contain_text(f"turn #{n - 1} ({nth} of {n})")
    frame_rows = page.locator(".thena-stepper-frame tbody tr")
    expect(frame_rows).to_have_count(3)
    expect(frame_rows.nth(1)).to_contain_text("add")
    expect(page.locator(".thena-stepper-header")).to_contain_text("finished")

    button(page, "Back").click()
    expect(position).to_contain_text("turn #1 (2nd of 3)")
    panel = page.locator(".thena-stepper-turn")
    expect(panel).to_contain_text("add")
    expect(panel).to_contain_text('{"a": 3, "b": 4}')
    expect(panel).to_contain_text("would stop: no")

    expect(page.locator(".thena-chart svg")).to_be_visible()  # the failure chart
    ARTIFACTS.mkdir(exist_ok=True)
    widget = page.locator(".jp-OutputArea-output").filter(has=page.locator(".thena-stepper-header"))
    # docs/stepper.png comes from test_stepper_debugger_browser.py's main screenshot
    widget.first.screenshot(path=str(ARTIFACTS / "stepper-three-steps.png"))


def test_a_script_in_model_text_does_not_run(page: Page, lab: Lab) -> None:
    open_and_run(page, lab, write_notebook(lab, "escaping.ipynb", SETUP, HOSTILE))
    stepper_root(page)
    button(page, "Run").click()
    expect(page.locator(".thena-stepper-header")).to_contain_text("finished")
    panel = page.locator(".thena-stepper-turn")
    expect(panel).to_contain_text('<script>window.__pwned = 1; document.title = "pwned"</script>')
    expect(panel).to_contain_text('<img src=x onerror="window.__pwned = 2">')
    expect(page.locator(".thena-stepper-turn img")).to_have_count(0)
    expect(page.locator(".thena-stepper-frame")).to_contain_text("<script>")
    page.wait_for_timeout(300)  # give an injected handler the chance it must not have
    assert page.evaluate("window.__pwned") is None
    assert page.title() != "pwned"


def test_break_on_failed_call_then_stop(page: Page, lab: Lab) -> None:
    open_and_run(page, lab, write_notebook(lab, "break_stop.ipynb", SETUP, BREAK_AND_STOP))
    stepper_root(page)
    page.get_by_label("on failed tool call").check()
    button(page, "Run").click()
    header = page.locator(".thena-stepper-header")
    expect(header).to_contain_text("breakpoint at turn 1")
    expect(header).to_contain_text("paused")
    expect(page.locator(".thena-stepper-turn")).to_contain_text("nope")
    button(page, "Stop").click()
    expect(header).to_contain_text("stopped")
    expect(button(page, "Step")).to_be_disabled()
    expect(page.locator(".thena-stepper-frame tbody tr")).to_have_count(2)
