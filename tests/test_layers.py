"""Importing the core pays for none of the notebook or SDK dependencies."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ["IPython", "ipywidgets", "pandas", "matplotlib", "anthropic", "openai"]


def test_core_imports_no_optional_dependency() -> None:
    code = (
        "import sys, thena_nb, thena_nb.core, thena_nb.rescue\n"
        "from thena_nb.models import ScriptedModel, FunctionModel, reply\n"
        "from thena_nb import Agent, Workflow, loop, until_answered\n"
        "wf = Workflow('w', [loop(steps=[Agent('A', model=ScriptedModel(['hi']))], until=until_answered)])\n"
        "assert wf.run('x').output == 'hi'\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_core_modules_import_nothing_upward() -> None:
    """`thena_nb.core` never imports `models` or `notebook` at module level."""
    import pathlib
    import re

    import thena_nb.core

    root = pathlib.Path(thena_nb.core.__file__).parent
    for path in root.rglob("*.py"):
        top_level = [
            line for line in path.read_text().splitlines() if re.match(r"^(from|import) ", line)
        ]
        bad = [
            line
            for line in top_level
            if re.search(
                r"thena_nb\.(models|notebook)|IPython|ipywidgets|pandas|matplotlib|anthropic", line
            )
        ]
        assert bad == [], f"{path.name}: {bad}"
