"""The shape of `thena_nb.models`: small functions, imports that only point down, lazy SDKs."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import thena_nb.models

PACKAGE = pathlib.Path(thena_nb.models.__file__).parent
SDKS = ["anthropic", "openai"]


def _modules() -> list[pathlib.Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _imported_names(tree: ast.AST) -> list[str]:
    """Every module an `import` names, at module level, in function bodies or typing blocks."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def test_importing_the_package_and_its_shared_modules_loads_no_sdk() -> None:
    """`AnthropicModel` and `OpenAICompatModel` load their SDKs on first use only."""
    code = (
        "import sys\n"
        "import thena_nb.models\n"
        "from thena_nb.models import FunctionModel, ScriptedModel, reply\n"
        "import thena_nb.models._offline, thena_nb.models._retry, thena_nb.models._wire\n"
        f"print(sorted(m for m in {SDKS!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_only_the_adapters_import_an_sdk() -> None:
    """The shared modules stay SDK-free, so the offline models never need an extra."""
    adapters = {"anthropic.py": "anthropic", "openai_compat.py": "openai"}
    for path in _modules():
        sdks = {
            name.split(".")[0]
            for name in _imported_names(ast.parse(path.read_text()))
            if name.split(".")[0] in SDKS
        }
        allowed = {adapters[path.name]} if path.name in adapters else set()
        assert sdks <= allowed, f"{path.name} imports {sorted(sdks - allowed)}"
