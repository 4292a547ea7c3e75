"""The Stepper's code stays split by job: `stepper.py` (the class, its traits and public
methods) and one mixin module per job, each small, none importing `stepper.py`, and none
with a method the widget's own classes would shadow or be shadowed by unnoticed."""

from __future__ import annotations

import ast
from pathlib import Path

import anywidget

from thena_nb.notebook import _stepper_controls, _stepper_events, _stepper_host, _stepper_render
from thena_nb.notebook.stepper import Stepper

NOTEBOOK = Path(_stepper_host.__file__).parent
MIXINS = {
    _stepper_controls: _stepper_controls._Controls,
    _stepper_render: _stepper_render._Render,
    _stepper_host: _stepper_host._Host,
    _stepper_events: _stepper_events._Events,
}
MAX_LINES = 520
"""`stepper.py` was 1,418 lines before the split; none of its modules may grow back to that."""


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, at run time or under `TYPE_CHECKING`."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_each_stepper_module_is_small() -> None:
    paths = [NOTEBOOK / "stepper.py", *(Path(m.__file__ or "") for m in MIXINS)]
    sizes = {p.name: len(p.read_text().splitlines()) for p in paths}
    assert all(n <= MAX_LINES for n in sizes.values()), sizes


def test_no_mixin_imports_the_stepper_module() -> None:
    for module in MIXINS:
        imported = _imports(Path(module.__file__ or ""))
        assert "thena_nb.notebook.stepper" not in imported, module.__name__
        assert "thena_nb.notebook.stepper.Stepper" not in imported, module.__name__


def test_the_stepper_combines_the_mixins_ahead_of_the_widget() -> None:
    mro = Stepper.__mro__
    assert all(mro.index(mixin) < mro.index(anywidget.AnyWidget) for mixin in MIXINS.values())


def test_no_mixin_method_has_a_widget_name() -> None:
    widget = set(dir(anywidget.AnyWidget))
    for mixin in MIXINS.values():
        clash = {name for name in vars(mixin) if callable(vars(mixin)[name])} & widget
        assert not clash, (mixin.__name__, clash)
