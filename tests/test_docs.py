"""The documentation site's pages: their examples run and say the truth, the nav lists them.

A ```python block of a page runs (``py`` blocks are shown only): each page's blocks run in
order, in a namespace that starts from the README's tour (the pages build on its `wf`, `run`,
`forecaster`, `get_weather`). A block that needs a real model's key is shown only, as in the
README. `mkdocs build --strict` (in `.ci/run`) checks links and references; this checks what
a build cannot: that the code on the pages works.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
# `expr  # 'value'`, `# [...]`, `# True` ...: the value the expression has, maybe followed
# by ': why' or '; more'.
CLAIM = re.compile(r"^(\S.*?)\s+# ('[^']*'|\[.*\]|True|False|None|\d+)(?:[:;]\s.*)?$")
SIDE_EFFECTS = ("run(", "map(", "fork(", "resume(", "continue_with(", "rescore(")


def _tour() -> str:
    block = BLOCK.search((ROOT / "README.md").read_text())
    assert block is not None
    return block.group(1)


def _runnable(page: Path) -> list[str]:
    return [b for b in BLOCK.findall(page.read_text()) if "AnthropicModel(" not in b]


def _claims(code: str) -> list[tuple[str, object]]:
    found = []
    for line in code.splitlines():
        m = CLAIM.match(line)
        if m and not any(s in m.group(1) for s in SIDE_EFFECTS):
            found.append((m.group(1), ast.literal_eval(m.group(2))))
    return found


@pytest.mark.parametrize("page", [p for p in PAGES if _runnable(p)], ids=lambda p: p.name)
def test_a_pages_python_blocks_run_and_their_claims_hold(page: Path) -> None:
    namespace: dict[str, object] = {}
    exec(compile(_tour(), "README.md", "exec"), namespace)
    for code in _runnable(page):
        exec(compile(code, str(page.relative_to(ROOT)), "exec"), namespace)
        for expression, value in _claims(code):
            assert eval(expression, namespace) == value, f"{page.name}: {expression}"


def test_the_claims_checked_are_many() -> None:
    """The value check above is not vacuous: the pages state values it compares."""
    claims = [c for p in PAGES for code in _runnable(p) for c in _claims(code)]
    assert len(claims) >= 8


def test_the_pages_with_code_are_the_expected_ones() -> None:
    """A page that loses its runnable blocks (say, by a fence spelt ```py) is noticed."""
    with_code = {p.name for p in PAGES if _runnable(p)}
    assert with_code >= {
        "getting-started.md", "concepts.md", "debugging.md", "replay.md", "experiments.md",
        "frameworks.md", "mcp.md", "traces.md",
    }  # fmt: skip


def _nav_files(entries: list[object]) -> list[str]:
    files: list[str] = []
    for entry in entries:
        values = entry.values() if isinstance(entry, dict) else [entry]
        for value in values:
            files += _nav_files(value) if isinstance(value, list) else [str(value)]
    return files


def test_the_nav_lists_every_page_and_only_pages_that_exist() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    nav = _nav_files(config["nav"])
    for name in nav:
        assert (DOCS / name).exists(), name
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md") if "_build" not in p.parts}
    assert pages == {n for n in nav if n.endswith(".md")}
    notebooks = {f"notebooks/{p.name}" for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert notebooks <= set(nav)


def test_semantics_names_every_rule_once() -> None:
    text = (DOCS / "semantics.md").read_text()
    for n in range(1, 29):
        assert text.count(f'<a id="s{n}"></a>**S{n}**') == 1, n


def test_the_pages_name_no_private_module() -> None:
    """Modules behind the public faces move; the pages (but the architecture's) name faces."""
    for page in [*PAGES, *DOCS.glob("api/*.md")]:
        if page.name != "architecture.md":
            assert not re.search(r"thena_nb[./]core[./]|\bcore/_|core\._", page.read_text()), page
