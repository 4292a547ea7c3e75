"""Helpers for the browser tests: the running server, notebooks, and the page's Stepper."""

from __future__ import annotations

import json
import os
import re
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import nbformat
from playwright.sync_api import Page, expect

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = os.environ.get("THENA_NB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
KERNEL_TIMEOUT_MS = 60_000


@dataclass
class Lab:
    """A running JupyterLab server."""

    url: str
    token: str
    root: Path

    def notebook_url(self, name: str) -> str:
        """The notebook in a fresh workspace of its own, so no earlier tab is restored."""
        workspace = Path(name).stem
        return f"{self.url}/lab/workspaces/{workspace}/tree/{name}?reset&token={self.token}"

    def api(self, method: str, path: str) -> object:
        request = urllib.request.Request(
            f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shut_down_sessions(self) -> None:
        sessions = self.api("GET", "/api/sessions")
        assert isinstance(sessions, list)
        for session in sessions:
            self.api("DELETE", f"/api/sessions/{session['id']}")


def write_notebook(lab: Lab, name: str, *sources: str) -> str:
    """Write a notebook of code cells into the server's directory; returns its name."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    nbformat.write(nb, lab.root / name)
    return name


def open_and_run(page: Page, lab: Lab, name: str) -> None:
    """Open the notebook, wait for its kernel, and run all its cells."""
    page.goto(lab.notebook_url(name))
    page.locator(".jp-NotebookPanel").first.wait_for(timeout=KERNEL_TIMEOUT_MS)
    # The status bar names the kernel once a session is connected to it.
    kernel = page.locator(".jp-StatusBar-Widget", has_text=re.compile(r"\| Idle"))
    kernel.first.wait_for(timeout=KERNEL_TIMEOUT_MS)
    cells = page.locator(".jp-NotebookPanel .jp-CodeCell")
    expect(cells.first).to_be_visible()
    count = cells.count()
    ran = page.locator(".jp-CodeCell .jp-InputPrompt", has_text=re.compile(r"\[\d+\]"))
    for _ in range(3):
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
        try:
            expect(ran).to_have_count(count, timeout=20_000)
            return
        except AssertionError:
            continue  # the kernel was not ready for the first request; ask again
    raise AssertionError(f"the cells of {name} never all ran")


def stepper_root(page: Page) -> Page:
    """Wait until the Stepper widget has rendered in the page."""
    expect(page.locator(".thena-stepper-header")).to_be_visible(timeout=KERNEL_TIMEOUT_MS)
    return page
