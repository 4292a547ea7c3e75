"""The time server's command line, and the MCP server processes this process has started."""

from __future__ import annotations

import psutil

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
