"""MCP servers from the dev extra, run over stdio with this interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil
import pytest

TIME_ARGS = ["-m", "mcp_server_time", "--local-timezone", "UTC"]


def server_processes(module: str) -> list[psutil.Process]:
    """This process's children running `python -m module`."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if module in child.cmdline():
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """A git repository with one commit and one changed file."""
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("config", "user.email", "tests@example.invalid")
    git("config", "user.name", "Tests")
    (repo / "notes.txt").write_text("first\n")
    git("add", "notes.txt")
    git("commit", "-q", "-m", "First notes")
    (repo / "notes.txt").write_text("first\nsecond\n")
    return repo


@pytest.fixture
def python() -> str:
    return sys.executable
