"""The shape of `thena_nb.models`: small functions, imports that only point down, lazy SDKs."""

from __future__ import annotations

import ast
import importlib.util
import pathlib
import subprocess
import sys

import pytest

import thena_nb.models

PACKAGE = pathlib.Path(thena_nb.models.__file__).parent
MAX_FUNCTION_LINES = 60
MAX_COMPLEXITY = 12
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


def test_no_function_is_longer_than_60_lines() -> None:
    """From the `def` line to the last line of the body, decorators not counted."""
    long = [
        f"{path.name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path in _modules()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == []


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None, reason="needs ruff (dev extra)")
def test_no_function_is_more_complex_than_12() -> None:
    """McCabe complexity as ruff's C901 counts it."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--no-cache",
            "--isolated",
            "--select",
            "C901",
            "--config",
            f"lint.mccabe.max-complexity={MAX_COMPLEXITY}",
            "--output-format",
            "concise",
            str(PACKAGE),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_models_never_import_the_notebook_layer() -> None:
    bad = [
        f"{path.name}: {name}"
        for path in _modules()
        for name in _imported_names(ast.parse(path.read_text()))
        if name == "thena_nb.notebook" or name.startswith("thena_nb.notebook.")
    ]
    assert bad == []


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
