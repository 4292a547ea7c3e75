"""The Stepper over a recorded run in a real JupyterLab page: a run stored in a SQLite file and
loaded back, scrubbed with the keyboard, seen in the light and dark themes and in an 800 px
window, then forked from the shown turn into a live session."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from .lab_helpers import Lab, open_and_run, stepper_root, write_notebook
from .test_stepper_debugger_browser import (
    CLIPPED_JS,
    COLOURS_JS,
    contrast,
    switch_to_dark,
    widget_shot,
)

pytestmark = pytest.mark.browser

SETUP = """
from thena_nb import Agent, Run, Workflow, loop, tool, until_answered
from thena_nb.models import ScriptedModel, reply
from thena_nb.store import SqliteRunStore

@tool
def add(a: int, b: int) -> int:
    '''Add two numbers.'''
    return a + b

def sums(replies):
    calc = Agent("Calc", model=ScriptedModel(replies), tools=[add], system="Add <carefully>.")
    return Workflow("sums", [loop(steps=[calc], until=until_answered, max_iterations=5)])
"""

VIEWED = """
HOSTILE = ('<script>window.__pwned = 1; document.title = "pwned"</script>'
           '<img src=x onerror="window.__pwned = 2"> the sum is 10')
recorded = sums([reply.tool("add", a=1, b=2), reply.tool("add", a=3, b=4), HOSTILE])
with SqliteRunStore.from_path("viewed.sqlite3") as writing:
    run_id = recorded.run("What is 1 + 2 + 3 + 4?", store=writing).run_id
store = SqliteRunStore("viewed.sqlite3")
run = Run.load(run_id, store=store)
viewer = run.stepper(workflow=sums(["1 + 2 + 3 + 4 = 10, said live"]), store=store)
viewer
"""


def switch_to_light(page: Page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Settings$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Theme$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^JupyterLab Light$")).click()
    expect(page.locator("body[data-jp-theme-light='true']")).to_have_count(1)


FORK_TIP = "Start a live session from turn 2: turns 0–1 are reused as recorded, turn 2 on runs live"


def test_view_a_stored_run_scrub_it_and_fork_it_live(page: Page, lab: Lab) -> None:
    page.set_viewport_size({"width": 1280, "height": 1800})
    open_and_run(page, lab, write_notebook(lab, "viewed.ipynb", SETUP, VIEWED))
    stepper_root(page)
    view = page.locator(".thena-stepper-view")
    position = page.locator(".thena-stepper-position")
    expect(view).to_contain_text("viewing a finished run (3 turns)")
    expect(view).to_contain_text("fork from here to continue live")
    expect(page.locator("button[title='Run one turn']")).to_be_hidden()
    expect(page.locator(".thena-stepper-controls")).to_be_hidden()
    expect(position).to_contain_text("turn #0 (1st of 3)")

    handle = page.locator(".thena-ui input.thena-range")
    handle.focus()
    handle.press("End")  # scrub to the last turn with the keyboard
    expect(position).to_contain_text("turn #2 (3rd of 3)")
    handle.press("ArrowLeft")
    expect(position).to_contain_text("turn #1 (2nd of 3)")
    handle.press("ArrowRight")
    expect(position).to_contain_text("turn #2 (3rd of 3)")
    expect(position).to_contain_text("loop iteration 3 of 5")

    panel = page.locator(".thena-stepper-turn")
    expect(panel).to_contain_text('<script>window.__pwned = 1; document.title = "pwned"</script>')
    expect(page.locator(".thena-stepper-turn img")).to_have_count(0)
    expect(page.locator(".thena-stepper-frame tbody tr")).to_have_count(3)
    expect(page.locator(".thena-chart svg")).to_be_visible()
    fork = page.locator(f"button[title='{FORK_TIP}']")
    expect(fork).to_be_enabled()
    assert page.evaluate("window.__pwned") is None
    widget_shot(page, "stepper-view-light.png")

    switch_to_dark(page)
    try:
        for selector in (".thena-stepper-view", ".thena-stepper-header", ".thena-frame td"):
            seen = page.evaluate(COLOURS_JS, selector)
            assert seen is not None, selector
            ratio = contrast(tuple(seen["fg"]), tuple(seen["bg"]))
            assert ratio >= 4.5, (selector, seen, ratio)
        widget_shot(page, "stepper-view-dark.png")
    finally:
        switch_to_light(page)

    page.set_viewport_size({"width": 800, "height": 1600})
    page.wait_for_timeout(300)
    clipped = page.evaluate(CLIPPED_JS, [".thena-stepper-header", ".thena-stepper-view-bar"])
    assert clipped == []
    assert fork.evaluate("e => e.scrollWidth <= e.clientWidth")
    widget_shot(page, "stepper-view-800.png")

    page.set_viewport_size({"width": 1280, "height": 1800})
    fork.click()
    header = page.locator(".thena-stepper-header")
    expect(header).to_contain_text("paused")
    expect(page.locator(".thena-stepper-view-bar")).to_be_hidden()
    expect(page.locator("text=live from turn 2")).to_be_visible()
    page.locator("button[title='Run to the end or the next breakpoint']").click()
    expect(header).to_contain_text("finished")
    expect(panel).to_contain_text("1 + 2 + 3 + 4 = 10, said live")
    expect(page.locator(".thena-stepper-frame tbody tr")).to_have_count(3)
    widget_shot(page, "stepper-view-forked.png")
    page.locator("button[title='Follow the run this was forked from']").click()
    expect(view).to_contain_text("viewing a finished run (3 turns)")
