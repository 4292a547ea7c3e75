"""Telemetry stays outside the core: nothing of OpenTelemetry loads until it is asked for."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import thena_nb

CORE = Path(thena_nb.__file__).parent / "core"


def test_import_thena_nb_and_a_run_load_no_opentelemetry() -> None:
    code = (
        "import sys\n"
        "from thena_nb import Agent, Workflow\n"
        "from thena_nb.models import ScriptedModel\n"
        "Workflow('w', [Agent('A', model=ScriptedModel(['hi']))]).run('go', store=False)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'opentelemetry'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_core_never_imports_opentelemetry() -> None:
    for path in CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n.split(".")[0] == "opentelemetry" for n in names), path


def test_without_opentelemetry_the_import_says_which_extra_to_install() -> None:
    """A missing optional dependency fails where it is asked for, with the extra to install."""
    code = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None  # as if it were not installed\n"
        "try:\n"
        "    from thena_nb import telemetry\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'thena_nb[otel]'" in out.stdout
