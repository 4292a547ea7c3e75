"""Functions a newcomer can read: none longer than 60 lines (ruff's C901 keeps each at a
McCabe complexity of 12 or less; see `pyproject.toml`)."""

from __future__ import annotations

import ast
from pathlib import Path

import thena_nb

PACKAGE = Path(thena_nb.__file__).parent
MAX_LINES = 60


def long_functions(root: Path, limit: int = MAX_LINES) -> list[str]:
    """`path:line name (n lines)` for every function longer than `limit` lines, counted
    from its `def` (decorators left out) to the last line of its body."""
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > limit:
                    where = path.relative_to(root.parent)
                    out.append(f"{where}:{node.lineno} {node.name} ({length} lines)")
    return out


def test_no_function_is_longer_than_60_lines() -> None:
    assert long_functions(PACKAGE) == []


def test_the_counter_counts(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    (tmp_path / "m.py").write_text(f"def short():\n    pass\n\n\ndef long():\n{body}\n")
    assert long_functions(tmp_path) == [f"{tmp_path.name}/m.py:5 long (62 lines)"]
