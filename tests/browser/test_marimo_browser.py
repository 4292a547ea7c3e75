"""The Stepper in marimo: `notebooks/12_marimo_stepper.py` served by `marimo edit` on
127.0.0.1, driven in headless Chromium.

marimo runs the notebook's cells when the page connects (`runtime.auto_instantiate`, set in
a user config kept in a temporary directory, with the theme following the browser's colour
scheme); the Stepper renders through anywidget, the same front-end module as in JupyterLab.
Screenshots go to `test-artifacts/` (light, dark, 800 px).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

from .conftest import _dies_with_parent, _free_port
from .lab_helpers import ARTIFACTS, KERNEL_TIMEOUT_MS, ROOT
from .test_stepper_debugger_browser import contrast

pytestmark = pytest.mark.browser

NOTEBOOK = ROOT / "notebooks" / "12_marimo_stepper.py"
START_TIMEOUT_S = 60.0
CONFIG = """
[runtime]
auto_instantiate = true

[display]
theme = "system"

[completion]
copilot = false
"""

COLOURS_JS = """(el) => {
  const parse = (s) => { const m = s.match(/[\\d.]+/g).map(Number);
                         return m.length === 3 ? [...m, 1] : m; };
  const over = (top, under) => top.slice(0, 3).map((c, i) => c * top[3] + under[i] * (1 - top[3]));
  const up = (e) => e.parentElement || (e.getRootNode() && e.getRootNode().host) || null;
  const layers = [];
  for (let e = el; e; e = up(e)) {
    const c = parse(getComputedStyle(e).backgroundColor);
    if (c[3] > 0) layers.push(c);
    if (c[3] >= 1) break;
  }
  let bg = [255, 255, 255];
  for (const c of layers.reverse()) bg = over(c, bg);
  return {fg: over(parse(getComputedStyle(el).color), bg), bg: bg};
}"""


@pytest.fixture(scope="module")
def marimo_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`marimo edit --headless --no-token` on a copy of the example notebook."""
    base = tmp_path_factory.mktemp("marimo")
    shutil.copyfile(NOTEBOOK, base / NOTEBOOK.name)
    (base / "config" / "marimo").mkdir(parents=True)
    (base / "config" / "marimo" / "marimo.toml").write_text(CONFIG)
    env = dict(os.environ)
    env.update(XDG_CONFIG_HOME=str(base / "config"), HOME=str(base))
    env.pop("ANTHROPIC_API_KEY", None)
    env.pop("OPENAI_API_KEY", None)
    port = _free_port()
    command = [sys.executable, "-m", "marimo", "edit", "--headless", "--no-token"]
    command += ["--port", str(port), "--host", "127.0.0.1", "--skip-update-check"]
    command += ["--no-sandbox", NOTEBOOK.name]
    log = base / "marimo.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command,
            cwd=base,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_dies_with_parent,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, proc, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"marimo exited with {proc.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.25)
    raise RuntimeError(f"marimo did not start in {START_TIMEOUT_S}s:\n{log.read_text()}")


def button(page: Page | Locator, title: str) -> Locator:
    scope = ".thena-stepper " if isinstance(page, Page) else ""
    return page.locator(f'{scope}button[title="{title}"]')


STEP, RUN, APPROVE = (
    "Run one turn",
    "Run to the end or the next breakpoint",
    "Run the call as the model made it",
)


UNCLIP_JS = """(el) => {
  // marimo scrolls a tall output in a box of its own: let it grow for the screenshot
  for (let e = el; e; e = e.parentElement || (e.getRootNode() && e.getRootNode().host)) {
    if (e === document.body) break;
    e.style.maxHeight = 'none';
  }
}"""


def shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    widget = page.locator(".thena-stepper").first
    widget.evaluate(UNCLIP_JS)
    widget.screenshot(path=str(ARTIFACTS / name))


def header_contrast(page: Page) -> float:
    seen = page.locator(".thena-stepper-header").first.evaluate(COLOURS_JS)
    return contrast(tuple(seen["fg"]), tuple(seen["bg"]))


def test_step_approve_and_run_in_marimo(page: Page, marimo_url: str) -> None:
    page.set_viewport_size({"width": 1280, "height": 1600})
    page.goto(marimo_url)
    header = page.locator(".thena-stepper-header")
    expect(header).to_have_count(1, timeout=KERNEL_TIMEOUT_MS)
    expect(header).to_contain_text("new")
    position = page.locator(".thena-stepper-position")
    for n, nth in ((1, "1st"), (2, "2nd"), (3, "3rd")):
        expect(button(page, STEP)).to_be_enabled()  # the last step has ended
        button(page, STEP).click()
        expect(position).to_contain_text(f"turn #{n - 1} ({nth} of {n})")
        expect(header).to_contain_text(f"{n} turn")
    expect(header).to_contain_text("paused")  # the status follows the session, live
    expect(page.locator(".thena-stepper-frame tbody tr")).to_have_count(3)

    expect(button(page, STEP)).to_be_enabled()
    button(page, STEP).click()  # the model asks to pay: the gate holds the call
    card = page.locator(".thena-gate")
    expect(card).to_have_count(1)
    expect(card).to_contain_text("wants to call pay")
    expect(header).to_contain_text("wait")
    expect(button(page, STEP)).to_be_disabled()
    shot(page, "marimo-stepper-gate.png")
    button(card, APPROVE).click()
    expect(card).to_have_count(0)
    expect(position).to_contain_text("turn #3 (4th of 4)")
    expect(page.locator(".thena-stepper-turn")).to_contain_text("paid 10")

    page.locator(".thena-stepper").first.focus()
    page.keyboard.press("ArrowLeft")  # keys drive it too
    expect(position).to_contain_text("turn #2 (3rd of 4)")
    page.locator(".thena-tab", has_text="What the model saw").click()
    expect(page.locator(".thena-saw")).to_be_visible()
    page.locator(".thena-tab", has_text="Reply").click()

    expect(button(page, RUN)).to_be_enabled()
    button(page, RUN).click()
    expect(header).to_contain_text("finished")
    expect(position).to_contain_text("turn #4 (5th of 5)")
    expect(page.locator(".thena-chart svg")).to_be_visible()
    assert header_contrast(page) >= 4.5
    shot(page, "marimo-stepper-light.png")

    page.emulate_media(color_scheme="dark")  # marimo's theme follows the browser here
    expect(page.locator(".dark, .dark-theme").first).to_be_attached(timeout=10_000)
    page.wait_for_timeout(300)
    assert header_contrast(page) >= 4.5
    shot(page, "marimo-stepper-dark.png")
    page.emulate_media(color_scheme="light")

    page.set_viewport_size({"width": 800, "height": 1600})
    page.wait_for_timeout(300)
    controls = page.locator(".thena-stepper-controls").first
    assert controls.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
    shot(page, "marimo-stepper-800.png")
