"""The experiments package keeps its shape: short functions, imports at the top, no cycles."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import thena_nb.experiments

PACKAGE = Path(thena_nb.experiments.__file__).parent
NAME = "thena_nb.experiments"
OPTIONAL = {"pandas", "numpy", "matplotlib", "ray", "tqdm", "ipywidgets"}
"""Optional dependencies: imported inside the function that needs them, never at the top."""


def parsed() -> dict[str, ast.Module]:
    """Every module of the package by its dotted name."""
    out = {}
    for path in sorted(PACKAGE.glob("*.py")):
        name = NAME if path.stem == "__init__" else f"{NAME}.{path.stem}"
        out[name] = ast.parse(path.read_text(), filename=str(path))
    return out


def imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules an import statement may load: `from a.b import c` may load `a.b` and `a.b.c`."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    assert node.level == 0, "the package imports by absolute name"
    base = node.module or ""
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def test_only_optional_dependencies_are_imported_inside_functions() -> None:
    inside = [
        f"{module}.{fn.name} imports {name}"
        for module, tree in parsed().items()
        for fn in functions(tree)
        for node in ast.walk(fn)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in imported(node)
        if name.split(".")[0] not in OPTIONAL
    ]
    assert inside == []


def test_the_modules_of_the_package_import_each_other_without_a_cycle() -> None:
    """Every import counts: at the top, under `TYPE_CHECKING`, inside functions."""
    trees = parsed()
    edges = {
        module: {
            name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for name in imported(node)
            if name in trees and name != module
        }
        for module, tree in trees.items()
    }
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import cycle: {' -> '.join((*path, module))}"
        if module in done:
            return
        for target in sorted(edges[module]):
            visit(target, (*path, module))
        done.add(module)

    for module in sorted(edges):
        visit(module, ())


def test_importing_the_package_loads_no_optional_dependency() -> None:
    code = (
        "import sys, thena_nb.experiments; "
        f"print(sorted(m for m in {sorted(OPTIONAL)!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
