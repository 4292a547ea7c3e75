"""The Stepper as a debugger in a real JupyterLab page: branch stepping, what the model saw,
gate cards, pause and continue, edit and continue, the dark theme, a narrow window; and a
run's page (`run.to_html`) opened with the network off."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from .lab_helpers import ARTIFACTS, ROOT, Lab, open_and_run, stepper_root, write_notebook

pytestmark = pytest.mark.browser

SETUP = """
import os
os.environ["THENA_NB_STORE"] = "off"
from thena_nb import Agent, Workflow, loop, parallel, tool, until_answered
from thena_nb.models import ScriptedModel, reply

@tool
def add(a: int, b: int) -> int:
    '''Add two numbers.'''
    return a + b
"""

PARALLEL = """
researcher = Agent("Researcher", model=ScriptedModel([reply.tool("add", a=1, b=2), "found 3"]),
                   tools=[add], system="You research <carefully>.")
critic = Agent("Critic", model=ScriptedModel(["looks fine"]))
planner = Agent("Planner", model=ScriptedModel(["plan: add 1 and 2"]), system="You plan.")
block = parallel([loop(steps=[researcher], until=until_answered, max_iterations=3), critic])
stepper = Workflow("research", [planner, block]).stepper("Add 1 and 2")
stepper
"""

GATED = """
def pay(amount: int) -> str:
    '''Pay an amount.'''
    return f"paid {amount}"

pay_tool = tool(pay, name="pay", gate=True)
calls = reply.calls([("pay", {"amount": 1}), ("pay", {"amount": 500}), ("pay", {"amount": 9})])
clerk = Agent("Clerk", model=ScriptedModel([calls, "All done."]), tools=[pay_tool])
stepper = Workflow("payments", [clerk]).stepper("Pay three bills")
stepper
"""

SLOW = """
calc = Agent("Calc", model=ScriptedModel([reply.tool("add", a=i, b=1) for i in range(8)]
                                         + ["done"], delay=0.4), tools=[add])
stepper = Workflow("slow", [loop(steps=[calc], until=until_answered, max_iterations=12)]
                   ).stepper("Count slowly")
stepper
"""

EDITABLE = """
calc = Agent("Calc", model=ScriptedModel([reply.tool("add", a=1, b=2),
                                          reply.tool("add", a=3, b=4), "The sum is 10."]),
             tools=[add], system="You add numbers.")
wf = Workflow("sums", [loop(steps=[calc], until=until_answered, max_iterations=5)])
stepper = wf.stepper("What is 1 + 2 + 3 + 4?")
stepper
"""

FAILING = """
calc = Agent("Calc", model=ScriptedModel([reply.tool("add", a="one", b=2), reply.tool("add", a=1, b=2),
                                          "The sum is 3."]), tools=[add])
wf = Workflow("fails", [loop(steps=[calc], until=until_answered, max_iterations=5)])
stepper = wf.stepper("What is 1 + 2?")
stepper
"""

MANY = """
calc = Agent("Calc", model=ScriptedModel([reply.tool("add", a=i, b=1) for i in range(14)]
                                         + ["done"]), tools=[add])
stepper = Workflow("many", [loop(steps=[calc], until=until_answered, max_iterations=20)]
                   ).stepper("Count")
stepper
"""

HOSTILE_RUN = """
text = ('<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">')
calc = Agent("Calc", model=ScriptedModel([reply.tool("add", a=1, b=2), "<b>bold</b> " + text]),
             tools=[add], system="You add <numbers>.")
run = Workflow("page", [loop(steps=[calc], until=until_answered)]).run("Add <1> and 2")
"""


def button(page: Page | Locator, title: str) -> Locator:
    """A button found by its tooltip (icon glyphs are part of the visible name)."""
    return page.locator(f'button[title="{title}"]')


STEP, RUN, PAUSE, CONTINUE = (
    "Run one turn",
    "Run to the end or the next breakpoint",
    "Pause at the next pause point: before this turn's tools, or the next model call",
    "Go on running from here",
)


def tab(page: Page, name: str) -> Locator:
    return page.locator(".thena-tabs .thena-tab", has_text=name)


def widget_shot(page: Page, name: str, *, docs: bool = False) -> None:
    """A screenshot of the Stepper's output area, kept in test-artifacts (and docs/)."""
    ARTIFACTS.mkdir(exist_ok=True)
    widget = page.locator(".jp-OutputArea-output").filter(has=page.locator(".thena-stepper-header"))
    shot = ARTIFACTS / name
    widget.first.screenshot(path=str(shot))
    if docs:
        shutil.copyfile(shot, ROOT / "docs" / name)


def test_step_through_a_parallel_block_one_branch_turn_at_a_time(page: Page, lab: Lab) -> None:
    page.set_viewport_size({"width": 1280, "height": 1800})
    open_and_run(page, lab, write_notebook(lab, "branches.ipynb", SETUP, PARALLEL))
    stepper_root(page)
    position = page.locator(".thena-stepper-position")
    header = page.locator(".thena-stepper-header")
    button(page, STEP).click()
    expect(position).to_contain_text("turn #0 (1st of 1)")
    button(page, STEP).click()
    expect(position).to_contain_text("parallel branch 0 (joins the run when the block ends)")
    expect(header).to_contain_text("1 turn (+1 in a parallel block)")
    button(page, STEP).click()
    expect(position).to_contain_text("turn #2 (3rd of 3)")
    expect(page.locator(".thena-entry.current")).to_contain_text("found 3")
    button(page, STEP).click()
    expect(position).to_contain_text("parallel branch 1")
    expect(header).to_contain_text("finished")
    expect(page.locator(".thena-transcript .thena-entry.turn")).to_have_count(4)
    expect(page.locator(".thena-transcript .b-branch")).to_have_count(3)

    tab(page, "What the model saw").click()
    saw = page.locator(".thena-saw")
    expect(saw).to_be_visible()
    expect(saw).to_contain_text("System prompt")
    expect(page.locator(".thena-system")).to_have_text("(none)")  # the Critic has none
    button(page, "Previous turn").click()
    expect(page.locator(".thena-system")).to_have_text("You research <carefully>.")
    button(page, "Previous turn").click()
    button(page, "Previous turn").click()
    expect(page.locator(".thena-stepper-position")).to_contain_text("turn #0 (1st of 4)")
    expect(page.locator(".thena-system")).to_have_text("You plan.")
    widget_shot(page, "stepper-branches.png")


def test_approve_edit_and_reject_gated_calls(page: Page, lab: Lab) -> None:
    page.set_viewport_size({"width": 1280, "height": 1800})
    open_and_run(page, lab, write_notebook(lab, "gates.ipynb", SETUP, GATED))
    stepper_root(page)
    button(page, RUN).click()
    cards = page.locator(".thena-gate")
    expect(cards).to_have_count(3)
    header = page.locator(".thena-stepper-header")
    expect(header).to_contain_text("3 tool calls wait for a decision")
    widget_shot(page, "stepper-gates.png", docs=True)

    first, second, third = cards.nth(0), cards.nth(1), cards.nth(2)
    button(first, "Run the call as the model made it").click()
    editor = second.locator("textarea")
    editor.fill('{"amount": "five hundred"}')
    button(second, "Run the call with the arguments in the editor").click()
    expect(second.locator(".thena-error-inline")).to_contain_text("do not fit tool 'pay'")
    editor.fill('{"amount": 50}')
    button(second, "Run the call with the arguments in the editor").click()
    expect(second.locator(".thena-error-inline")).to_have_count(0)
    third.locator("input[placeholder='reason for rejecting']").fill("not this one")
    button(third, "Do not run it; the model is told the reason").click()

    expect(header).to_contain_text("finished")
    expect(page.locator(".thena-gate")).to_have_count(0)
    transcript = page.locator(".thena-transcript")
    expect(transcript).to_contain_text("paid 1")
    expect(transcript).to_contain_text("paid 50")
    expect(transcript).to_contain_text("not this one")
    expect(transcript.locator(".b-decision")).to_have_text(["approve", "edit", "reject"])


def test_pause_and_continue_a_run(page: Page, lab: Lab) -> None:
    open_and_run(page, lab, write_notebook(lab, "pause.ipynb", SETUP, SLOW))
    stepper_root(page)
    header = page.locator(".thena-stepper-header")
    button(page, RUN).click()
    expect(header).to_contain_text("Calc is answering…")
    expect(header).to_contain_text(re.compile(r"running · [12] turns?"))
    button(page, PAUSE).click()
    # "pausing…" shows at once and lasts until the model call in flight ends (< 0.4 s)
    expect(header).to_contain_text(re.compile(r"pausing…|paused before"))
    expect(header).to_contain_text(
        re.compile(r"paused before (tools — Continue runs them|the next)")
    )
    expect(header).not_to_contain_text("pausing")
    expect(button(page, CONTINUE)).to_be_enabled()
    paused_at = page.locator(".thena-stepper-position").inner_text()
    page.wait_for_timeout(1000)  # nothing moves while paused
    assert page.locator(".thena-stepper-position").inner_text() == paused_at
    assert "9 turns" not in header.inner_text()
    button(page, CONTINUE).click()
    expect(header).to_contain_text("running")
    expect(header).to_contain_text("finished", timeout=20_000)
    expect(header).to_contain_text("9 turns")
    expect(header).to_contain_text("until")


def test_edit_a_turn_and_continue(page: Page, lab: Lab) -> None:
    open_and_run(page, lab, write_notebook(lab, "edit.ipynb", SETUP, EDITABLE))
    stepper_root(page)
    header = page.locator(".thena-stepper-header")
    button(page, RUN).click()
    expect(header).to_contain_text("finished")
    button(page, "Previous turn").click()
    expect(page.locator(".thena-stepper-position")).to_contain_text("turn #1 (2nd of 3)")
    tab(page, "Edit").click()
    box = page.locator(".thena-edit textarea")
    box.fill("Stop here: the sum is 3 + <4>.")
    button(page, "Fork the run with this edit").click()
    expect(page.locator(".thena-stepper-position")).to_contain_text("turn #1 (2nd of 2)")
    expect(page.locator(".thena-transcript")).to_contain_text("Stop here: the sum is 3 + <4>.")
    expect(page.get_by_text("a fork of run")).to_be_visible()
    back = button(page, "Follow the run this was forked from")
    expect(back).to_be_visible()
    back.click()
    expect(page.locator(".thena-transcript")).to_contain_text("The sum is 10.")
    expect(back).to_be_hidden()


def relative_luminance(rgb: tuple[float, float, float]) -> float:
    def channel(c: float) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(fg: tuple[float, float, float], bg: tuple[float, float, float]) -> float:
    a, b = sorted((relative_luminance(fg), relative_luminance(bg)), reverse=True)
    return (a + 0.05) / (b + 0.05)


COLOURS_JS = """(sel) => {
  const parse = (s) => { const m = s.match(/[\\d.]+/g).map(Number);
                         return m.length === 3 ? [...m, 1] : m; };
  const over = (top, under) => top.slice(0, 3).map((c, i) => c * top[3] + under[i] * (1 - top[3]));
  const el = document.querySelector(sel);
  if (!el) return null;
  const layers = [];
  for (let e = el; e; e = e.parentElement) {
    const c = parse(getComputedStyle(e).backgroundColor);
    if (c[3] > 0) layers.push(c);
    if (c[3] >= 1) break;
  }
  let bg = [255, 255, 255];
  for (const c of layers.reverse()) bg = over(c, bg);
  const style = getComputedStyle(el);
  const text = parse(el instanceof SVGElement ? style.fill : style.color);
  return {fg: over(text, bg), bg: bg, fill: style.fill, color: style.color};
}"""


def switch_to_dark(page: Page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Settings$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Theme$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^JupyterLab Dark$")).click()
    expect(page.locator("body[data-jp-theme-light='false']")).to_have_count(1, timeout=20_000)
    page.wait_for_timeout(500)


def switch_to_light(page: Page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Settings$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Theme$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^JupyterLab Light$")).click()
    expect(page.locator("body[data-jp-theme-light='true']")).to_have_count(1, timeout=20_000)
    page.wait_for_timeout(500)


def test_dark_theme_colours_have_contrast(page: Page, lab: Lab) -> None:
    page.set_viewport_size({"width": 1280, "height": 1800})
    open_and_run(page, lab, write_notebook(lab, "dark.ipynb", SETUP, EDITABLE))
    stepper_root(page)
    button(page, RUN).click()
    expect(page.locator(".thena-stepper-header")).to_contain_text("finished")
    expect(page.locator(".thena-chart svg")).to_be_visible()
    switch_to_dark(page)
    try:
        for selector in (
            ".thena-stepper-header",
            ".thena-stepper-turn .thena-turn > div:last-child",
            ".thena-chart svg text",
            ".thena-frame td",
            ".thena-transcript .thena-entry",
        ):
            seen = page.evaluate(COLOURS_JS, selector)
            assert seen is not None, selector
            ratio = contrast(tuple(seen["fg"]), tuple(seen["bg"]))
            assert ratio >= 4.5, (selector, seen, ratio)
        chart_bg = page.evaluate(
            "() => getComputedStyle(document.querySelector('.thena-chart svg')).backgroundColor"
        )
        assert chart_bg in ("rgba(0, 0, 0, 0)", "transparent")  # the theme shows through
        widget_shot(page, "stepper-dark.png", docs=True)
    finally:
        switch_to_light(page)


TEXTS_JS = """(root) => {
  const parse = (s) => { const m = s.match(/[\\d.]+/g).map(Number);
                         return m.length === 3 ? [...m, 1] : m; };
  const over = (top, under) => top.slice(0, 3).map((c, i) => c * top[3] + under[i] * (1 - top[3]));
  const colours = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c[3] > 0) layers.push(c);
      if (c[3] >= 1) break;
    }
    let bg = [255, 255, 255];
    for (const c of layers.reverse()) bg = over(c, bg);
    return {fg: over(parse(getComputedStyle(el).color), bg), bg: bg};
  };
  const out = [];
  for (const host of document.querySelectorAll(root)) {
    for (const el of host.querySelectorAll('*')) {
      const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
      const r = el.getBoundingClientRect();
      if (!own || r.width === 0 || r.height === 0 || el instanceof SVGElement) continue;
      const name = el.tagName.toLowerCase() + '.' + (el.getAttribute('class') || '') +
                   ' "' + el.textContent.trim().slice(0, 30) + '"';
      out.push({name: name, ...colours(el)});
    }
  }
  return out;
}"""
"""Every visible HTML element with text of its own under `root`: its text colour composited
on what is behind it, and that background (the chart's SVG text is checked on its own)."""

ERROR_TEXTS = {
    "Reply tab": '.thena-stepper-turn pre[style*="color:#d62728"]',
    "Tools tab": ".thena-inspector .thena-bad-text pre",
    "transcript": ".thena-transcript .thena-bad-text pre",
}


def low_contrast(page: Page) -> list[str]:
    """Every text of the Stepper's own views under 4.5:1 against what is behind it."""
    seen = page.evaluate(TEXTS_JS, ".thena-stepper .thena-section")
    assert len(seen) > 20  # the check saw the views
    return [
        f"{t['name']}: {contrast(tuple(t['fg']), tuple(t['bg'])):.2f} {t['fg']} on {t['bg']}"
        for t in seen
        if contrast(tuple(t["fg"]), tuple(t["bg"])) < 4.5
    ]


def test_every_text_has_contrast_in_light_and_dark_with_errors_shown(page: Page, lab: Lab) -> None:
    """The error text of the Reply and Tools tabs and the transcript, and every other text
    of the Stepper's views, at least 4.5:1 (WCAG AA) in JupyterLab Light and Dark."""
    page.set_viewport_size({"width": 1280, "height": 1800})
    open_and_run(page, lab, write_notebook(lab, "contrast.ipynb", SETUP, FAILING))
    stepper_root(page)
    button(page, RUN).click()
    expect(page.locator(".thena-stepper-header")).to_contain_text("finished")
    button(page, "Previous turn").click()
    button(page, "Previous turn").click()
    expect(page.locator(".thena-stepper-position")).to_contain_text("turn #0 (1st of 3)")
    for theme in ("light", "dark"):
        if theme == "dark":
            switch_to_dark(page)
        try:
            for tab_name in ("Reply", "Tools"):
                tab(page, tab_name).click()
                for where, selector in ERROR_TEXTS.items():
                    if where.endswith("tab") and not where.startswith(tab_name):
                        continue
                    expect(page.locator(selector).first).to_be_visible()
                    seen = page.evaluate(COLOURS_JS, selector)
                    ratio = contrast(tuple(seen["fg"]), tuple(seen["bg"]))
                    assert ratio >= 4.5, (theme, where, seen, ratio)
                    assert seen["fg"][0] > seen["fg"][1] + 40, (theme, where, seen)  # still red
                assert low_contrast(page) == [], (theme, tab_name)
            widget_shot(page, f"stepper-errors-{theme}.png")
        finally:
            if theme == "dark":
                switch_to_light(page)


def test_run_scrolls_the_transcript_to_the_shown_turn(page: Page, lab: Lab) -> None:
    page.set_viewport_size({"width": 1280, "height": 1800})
    open_and_run(page, lab, write_notebook(lab, "follow.ipynb", SETUP, MANY))
    stepper_root(page)
    button(page, RUN).click()
    expect(page.locator(".thena-stepper-header")).to_contain_text("finished")
    box = page.locator(".thena-transcript")
    current = page.locator(".thena-transcript .thena-entry.current")
    expect(current).to_contain_text("done")
    inside = "([b, c]) => c.top >= b.top - 1 && c.bottom <= b.bottom + 1"
    rects = [box.bounding_box(), current.bounding_box()]
    assert rects[0] is not None and rects[1] is not None
    assert box.evaluate("e => e.scrollHeight > e.clientHeight")  # it does scroll
    b, c = rects[0], rects[1]
    assert page.evaluate(
        inside,
        [
            {"top": b["y"], "bottom": b["y"] + b["height"]},
            {"top": c["y"], "bottom": c["y"] + c["height"]},
        ],
    ), rects
    expect(page.locator(".thena-stepper-frame tbody tr")).to_have_count(15)
    widget_shot(page, "stepper-follow.png")


def run_at_332_pixels(page: Page, lab: Lab, name: str, code: str) -> None:
    """Run the Stepper made by `code` to its end, then narrow it to 332 px."""
    page.set_viewport_size({"width": 1280, "height": 1400})
    open_and_run(page, lab, write_notebook(lab, name, SETUP, code))
    stepper_root(page)
    button(page, RUN).click()
    expect(page.locator(".thena-stepper-header")).to_contain_text("finished")
    # JupyterLab itself does not fit a 332 px window: narrow the widget's own box instead
    page.locator(".thena-stepper").evaluate("e => { e.style.width = '332px'; }")
    page.wait_for_timeout(300)


def assert_turn_table_fits(page: Page) -> None:
    """The turn table does not scroll sideways."""
    table = page.locator(".thena-part-frame_html")
    assert table.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), table.evaluate(
        "e => [e.scrollWidth, e.clientWidth]"
    )


def test_the_scrub_row_stays_one_line_at_332_pixels(page: Page, lab: Lab) -> None:
    run_at_332_pixels(page, lab, "narrow332.ipynb", EDITABLE)
    row = page.locator(".thena-scrub")
    tops = [
        round(box["y"] + box["height"] / 2)
        for box in (
            button(page, "Previous turn").bounding_box(),
            row.locator(".thena-slider").bounding_box(),
            button(page, "Next turn").bounding_box(),
        )
        if box is not None
    ]
    assert len(tops) == 3 and max(tops) - min(tops) <= 4, tops
    assert row.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
    assert_turn_table_fits(page)
    widget_shot(page, "stepper-332.png")


LONG_NAMES = """
@tool
def reconcile_quarterly_revenue_ledger_entries(a: int, b: int) -> int:
    '''Add two numbers.'''
    return a + b

agent = Agent("QuarterlyRevenueReconciliationSpecialist",
              model=ScriptedModel([reply.tool("reconcile_quarterly_revenue_ledger_entries", a=1, b=2),
                                   "The sum is 3."]),
              tools=[reconcile_quarterly_revenue_ledger_entries])
wf = Workflow("ledger", [loop(steps=[agent], until=until_answered, max_iterations=5)])
stepper = wf.stepper("What is 1 + 2?")
stepper
"""


def test_long_agent_and_tool_names_wrap_in_a_332_pixel_turn_table(page: Page, lab: Lab) -> None:
    run_at_332_pixels(page, lab, "narrow-names.ipynb", LONG_NAMES)
    table = page.locator(".thena-part-frame_html")
    expect(table).to_contain_text("QuarterlyRevenueReconciliationSpecialist")
    assert_turn_table_fits(page)
    widget_shot(page, "stepper-332-long-names.png")


CLIPPED_JS = """(selectors) => {
  const out = [];
  for (const sel of selectors) {
    for (const root of document.querySelectorAll(sel)) {
      for (const e of [root, ...root.querySelectorAll('*')]) {
        if (e.scrollWidth > e.clientWidth + 1 && e.clientWidth > 0) {
          out.push(sel + ' ' + e.tagName + '.' + e.className + ' ' + e.scrollWidth + '>' +
                   e.clientWidth + ' ' + (e.textContent || '').slice(0, 40));
        }
      }
    }
  }
  return out;
}"""


def test_nothing_is_clipped_at_800_pixels(page: Page, lab: Lab) -> None:
    page.set_viewport_size({"width": 800, "height": 1600})
    open_and_run(page, lab, write_notebook(lab, "narrow.ipynb", SETUP, PARALLEL))
    stepper_root(page)
    button(page, RUN).click()
    expect(page.locator(".thena-stepper-header")).to_contain_text("finished")
    clipped = page.evaluate(
        CLIPPED_JS, [".thena-stepper-header", ".thena-stepper-controls", ".thena-gate"]
    )
    assert clipped == []
    for name in ("Step iteration", "Continue", "Pause"):
        label = page.locator(".thena-stepper-controls button", has_text=name)
        assert label.evaluate("e => e.scrollWidth <= e.clientWidth")
    widget_shot(page, "stepper-800.png", docs=True)


def test_the_main_screenshot(page: Page, lab: Lab) -> None:
    page.set_viewport_size({"width": 1280, "height": 1800})
    open_and_run(page, lab, write_notebook(lab, "main_shot.ipynb", SETUP, EDITABLE))
    stepper_root(page)
    button(page, RUN).click()
    expect(page.locator(".thena-stepper-header")).to_contain_text("finished")
    button(page, "Previous turn").click()
    what_if = page.locator("input[placeholder^='what if until']")
    what_if.fill("max_tool_calls(1)")
    what_if.press("Enter")
    expect(page.locator(".thena-what-if")).to_contain_text("would have stopped after iteration")
    expect(page.locator(".thena-chart .what-if")).to_have_count(1)
    page.wait_for_timeout(300)
    widget_shot(page, "stepper.png", docs=True)


def test_a_run_page_offline(browser: Browser, tmp_path: Path) -> None:
    import subprocess
    import sys

    page_file = tmp_path / "run.html"
    script = SETUP + HOSTILE_RUN + f"run.to_html({str(page_file)!r})\n"
    subprocess.run([sys.executable, "-c", script], check=True, cwd=tmp_path, timeout=120)
    context = browser.new_context(viewport={"width": 1280, "height": 1400}, offline=True)
    requests: list[str] = []
    context.on("request", lambda r: requests.append(r.url))
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(page_file.as_uri())
    position = page.locator("#thena-pos")
    expect(position).to_have_text("turn 0 (1 of 2)")
    expect(page.locator(".thena-turn-view:not([hidden])")).to_have_count(1)
    page.locator(".thena-tab", has_text="What the model saw").first.click()
    expect(page.locator(".thena-turn-view:not([hidden]) .thena-system")).to_have_text(
        "You add <numbers>."
    )
    page.locator("#thena-forward").click()
    expect(position).to_have_text("turn 1 (2 of 2)")
    shown = page.locator(".thena-turn-view:not([hidden])")
    expect(shown).to_have_attribute("data-turn", "1")
    page.locator(".thena-tab", has_text="Reply").nth(1).click()
    expect(shown).to_contain_text("<script>window.__pwned = 1</script>")
    expect(page.locator(".thena-chart line.now.current")).to_have_count(1)
    page.locator("#thena-back").click()
    expect(position).to_have_text("turn 0 (1 of 2)")
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img").count() == 0
    assert requests == [page_file.as_uri()], requests
    assert errors == []
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "run-page.png"), full_page=True)
    shutil.copyfile(ARTIFACTS / "run-page.png", ROOT / "docs" / "run-page.png")
    context.close()
