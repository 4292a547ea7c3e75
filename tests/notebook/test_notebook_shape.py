"""The notebook layer's shape: small functions, imports that stay in their lane, no private
engine state read, and nothing heavy loaded by importing the package.

These read the source with `ast` (and run ruff's McCabe check) rather than call the code:
they pin how the layer is built, which no behaviour test sees.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import thena_nb.notebook

NOTEBOOK = Path(thena_nb.notebook.__file__).parent


def modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(NOTEBOOK.rglob("*.py")):
        yield path, ast.parse(path.read_text(), filename=str(path))


def is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def test_the_notebook_layer_needs_no_concrete_model() -> None:
    """Every import counts: module level, inside functions and under `TYPE_CHECKING`."""
    found = []
    for path, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found += [
                f"{path.name}:{node.lineno} {n}" for n in names if n.startswith("thena_nb.models")
            ]
    assert found == []


def test_no_private_attribute_of_another_object_is_read() -> None:
    """The layer drives runs through the public `Session` only: `self._x` is its own state,
    `ctx._loops` or `session._control` would be the engine's."""
    found = []
    for path, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                own = isinstance(node.value, ast.Name) and node.value.id == "self"
                value = node.value
                own = own or (  # `super()._x`: the object's own, inherited
                    isinstance(value, ast.Call) and getattr(value.func, "id", None) == "super"
                )
                if not own and not is_dunder(node.attr):
                    found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr":
                name = node.args[1] if len(node.args) > 1 else None
                text = str(name.value) if isinstance(name, ast.Constant) else ""
                if text.startswith("_") and not is_dunder(text):
                    found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    assert found == []


def test_importing_the_package_and_display_loads_nothing_heavy() -> None:
    """`display` is what `Run._repr_html_` imports; pandas and matplotlib wait for a run."""
    code = (
        "import sys, thena_nb.notebook, thena_nb.notebook.display\n"
        "heavy = ('IPython', 'ipywidgets', 'pandas', 'matplotlib')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
