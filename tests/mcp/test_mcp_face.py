"""`thena_nb.mcp` loads the SDK only when a run opens a server, and naming a server without
the SDK installed fails at once, saying which extra to install."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

from thena_nb import mcp

PROBE = (
    "import sys\n"
    "{code}\n"
    "print(sorted(m for m in ('mcp', 'mcp_types', 'httpx2', 'jsonschema') if m in sys.modules))"
)


def loaded_after(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(code=code)], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_naming_a_server_loads_no_sdk_until_a_run_opens_it() -> None:
    code = (
        "from thena_nb import Agent, mcp\n"
        "from thena_nb.models import ScriptedModel\n"
        "Agent('A', model=ScriptedModel(['ok']), tools=[mcp.stdio('x'), mcp.http('http://h/mcp')])"
    )
    assert loaded_after("import thena_nb") == "[]"
    assert loaded_after(code) == "[]"


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: mcp.stdio(sys.executable, ["-m", "mcp_server_time"]), "mcp.stdio"),
        (lambda: mcp.http("http://127.0.0.1:8000/mcp"), "mcp.http"),
    ],
)
def test_without_the_sdk_naming_a_server_fails_at_once_with_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, make: Callable[[], object], named: str
) -> None:
    """Where the user asked for it, not later inside a run."""
    monkeypatch.setitem(sys.modules, "mcp", None)  # `import mcp` now fails, as if not installed
    with pytest.raises(ImportError) as info:
        make()
    assert f"`{named}(...)`" in str(info.value)
    assert "pip install 'thena_nb[mcp]'" in str(info.value)
