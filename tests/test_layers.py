"""The house's layers: what each floor may import, read from every import in the package.

Every `import` is parsed (module level, inside functions, under `TYPE_CHECKING`), so an
import that runs back up cannot hide in a function body. The rules:

- the core stands on floors, each a package with one job (`FLOORS`): `records` (what every
  layer shares), `parts` (what a workflow is built from), `rescue` (text to tool calls),
  `runs` (runs as records to read), `store` (durable runs), `engine` (what runs a workflow),
  then `workflow.py` and the fork on top. A module imports from its own floor or below, at
  run time, in a function body and under `TYPE_CHECKING` alike;
- the one exception is `core/_portals.py`, the only module whose imports run upward (to a
  higher floor or out of the core: the notebook layer, experiments, the faces), each in the
  function that needs it;
- no module of `core` imports inside a function, except `_portals.py` and the few imports
  `import thena_nb` defers to the first run (`DEFERRED`);
- the core's modules form no import cycle, counting function-body and `TYPE_CHECKING`
  imports (the portal's upward imports left out: that is what it is for);
- no module of the package is in an import cycle either, counted the same way: the faces
  (`thena_nb`, `thena_nb.mcp`, ...) hand work to the floors above the core through the portal
  too;
- `models` never imports `notebook`;
- `import thena_nb` loads none of the optional or heavy dependencies, nor `sqlite3`;
- pytest is imported only by the shipped store contract suite, which no module imports.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import thena_nb

PACKAGE = Path(thena_nb.__file__).parent
HEAVY = ["IPython", "ipywidgets", "pandas", "matplotlib", "anthropic", "openai", "pytest"]
TESTING = "thena_nb.store_contract"  # the one module that imports pytest; none imports it
FACES = ("thena_nb", "thena_nb.store", "thena_nb.rescue")
UPPER = ("thena_nb.models", "thena_nb.notebook", "thena_nb.experiments")
PORTALS = "thena_nb.core._portals"
DEFERRED = {
    "thena_nb.core.workflow": {
        "asyncio",
        "thena_nb.core.engine._aio",
        "thena_nb.core._fork",
        "thena_nb.core.engine.foreign",
        "thena_nb.core.engine.session",
        "thena_nb.core.store.base",
    },
    "thena_nb.core.parts._tool_time": {"asyncio"},
}
FLOORS = ["records", "parts", "rescue", "runs", "store", "engine"]
"""The core's packages from the ground up; the core's own modules (`workflow.py`, the fork)
stand above them all."""
"""The function-body imports of the core besides the portals': the machinery that runs a
workflow, which defining one does not need (`tests/test_import_cost.py` checks that `import
thena_nb` leaves it unloaded)."""


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module (a submodule when `from pkg import sub` names one)
    where: str  # "module", "function" or "typing"
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _targets(node: ast.Import | ast.ImportFrom, source: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = source if is_package else source.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    out = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        out.append(sub if _is_module(sub) else base)
    return out


def _is_module(name: str) -> bool:
    if not name.startswith("thena_nb"):
        return False
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path) -> list[Import]:
    """Every import in one file, with where it stands."""
    source = module_name(path)
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[Import] = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            here = where
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                here = "function"
            elif isinstance(child, ast.If) and _is_type_checking(child.test) and where == "module":
                for stmt in child.body:
                    visit_stmt(stmt, "typing")
                for stmt in child.orelse:
                    visit_stmt(stmt, where)
                continue
            visit_stmt(child, here)

    def visit_stmt(node: ast.AST, where: str) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for target in _targets(node, source, is_package):
                found.append(Import(source, target, where, node.lineno))
        else:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                where = "function"
            visit(node, where)

    visit(tree, "module")
    return found


ALL_IMPORTS = [imp for path in sorted(PACKAGE.rglob("*.py")) for imp in imports_of(path)]


def _in(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _show(imps: list[Import]) -> list[str]:
    return [f"{i.source} -> {i.target} ({i.where}, line {i.line})" for i in imps]


def test_the_parser_sees_every_kind_of_import() -> None:
    """A check of the checker: it finds function-body and TYPE_CHECKING imports."""
    portals = [i for i in ALL_IMPORTS if i.source == PORTALS]
    assert {i.where for i in portals} >= {"module", "function", "typing"}
    assert any(i.target == "thena_nb.notebook.frames" and i.where == "function" for i in portals)


def test_core_imports_nothing_above_it_except_through_the_portals() -> None:
    bad = [
        i
        for i in ALL_IMPORTS
        if _in(i.source, "thena_nb.core")
        and i.source != PORTALS
        and (any(_in(i.target, up) for up in UPPER) or i.target in FACES)
    ]
    assert bad == [], _show(bad)


def test_core_imports_inside_functions_only_in_the_portals_and_the_deferred() -> None:
    bad = [
        i
        for i in ALL_IMPORTS
        if _in(i.source, "thena_nb.core")
        and i.source != PORTALS
        and i.where == "function"
        and i.target not in DEFERRED.get(i.source, ())
    ]
    assert bad == [], _show(bad)


def floor_of(module: str) -> int:
    """The floor of a core module: its package's place in `FLOORS`, or the top."""
    if module == PORTALS:
        return 0  # every floor may hand work up through it; its own upward imports are lazy
    rest = module.removeprefix("thena_nb.core").lstrip(".").split(".")[0]
    return FLOORS.index(rest) if rest in FLOORS else len(FLOORS)


def _core_edges() -> list[Import]:
    """The imports among the core's modules, but the portal's upward ones."""
    return [
        i
        for i in ALL_IMPORTS
        if _in(i.source, "thena_nb.core")
        and _in(i.target, "thena_nb.core")
        and i.source != i.target
        and not (i.source == PORTALS and i.where != "module")
    ]


def test_every_core_module_stands_on_a_floor() -> None:
    modules = {module_name(path) for path in (PACKAGE / "core").rglob("*.py")}
    top = sorted(m for m in modules if floor_of(m) == len(FLOORS))
    assert top == [
        "thena_nb.core",
        "thena_nb.core._collector",
        "thena_nb.core._fork",
        "thena_nb.core.workflow",
    ]


def test_core_modules_import_only_their_floor_or_below() -> None:
    """At run time, in function bodies and under `TYPE_CHECKING`; the portal is the exception."""
    bad = [i for i in _core_edges() if floor_of(i.target) > floor_of(i.source)]
    assert bad == [], _show(bad)


def test_core_modules_form_no_import_cycle() -> None:
    """Counting function-body and `TYPE_CHECKING` imports; the graph is the core's modules."""
    graph: dict[str, set[str]] = {}
    for i in _core_edges():
        graph.setdefault(i.source, set()).add(i.target)
    cycle = _find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_the_package_forms_no_import_cycle() -> None:
    """Every module of the package, counting function-body and `TYPE_CHECKING` imports; the
    portal's upward imports are left out, as in the core's check."""
    graph: dict[str, set[str]] = {}
    for i in ALL_IMPORTS:
        if (
            _in(i.target, "thena_nb")
            and i.source != i.target
            and not (i.source == PORTALS and i.where != "module")
        ):
            graph.setdefault(i.source, set()).add(i.target)
    cycle = _find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": {"c"}}) is None


def test_only_the_store_contract_imports_pytest_and_nothing_imports_it() -> None:
    users = [i for i in ALL_IMPORTS if _in(i.target, "pytest") or _in(i.target, TESTING)]
    assert {i.source for i in users} == {TESTING}, _show(users)


def test_models_never_import_the_notebook_layer() -> None:
    bad = [
        i
        for i in ALL_IMPORTS
        if _in(i.source, "thena_nb.models") and _in(i.target, "thena_nb.notebook")
    ]
    assert bad == [], _show(bad)


def _loaded_after(code: str) -> list[str]:
    probe = (
        f"{code}\nimport sys\nprint(sorted(m for m in {[*HEAVY, 'sqlite3']!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return eval(out.stdout.strip())  # a list literal printed by the probe


def test_import_thena_nb_loads_no_optional_dependency_nor_sqlite() -> None:
    assert _loaded_after("import thena_nb, thena_nb.core, thena_nb.rescue") == []


@pytest.mark.parametrize("store", ["False", "None"])
def test_a_run_loads_no_notebook_or_sdk_dependency(store: str, tmp_path: Path) -> None:
    code = (
        "import os\n"
        f"os.environ['THENA_NB_STORE'] = {str(tmp_path / 'runs.sqlite3')!r}\n"
        "from thena_nb.models import ScriptedModel, FunctionModel, reply\n"
        "from thena_nb import Agent, Workflow, loop, until_answered\n"
        "wf = Workflow('w', [loop(steps=[Agent('A', model=ScriptedModel(['hi']))], "
        "until=until_answered)])\n"
        f"assert wf.run('x', store={store}).output == 'hi'\n"
    )
    loaded = _loaded_after(code)
    # The default store is SQLite: a run that uses it loads sqlite3, and only then.
    assert loaded == ([] if store == "False" else ["sqlite3"])
