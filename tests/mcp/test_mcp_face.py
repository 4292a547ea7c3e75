"""`thena_nb.mcp` loads the SDK only when a run opens a server."""

from __future__ import annotations

import subprocess
import sys

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
