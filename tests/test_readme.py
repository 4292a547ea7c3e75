"""The README's tour runs and says the truth."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def test_the_tour_runs_as_the_readme_says() -> None:
    block = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert block is not None
    code = block.group(1)
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    run = namespace["run"]
    assert run.output == "It is sunny in Lisbon."  # type: ignore[attr-defined]
    assert run.loops[0].stop_reason == "until"  # type: ignore[attr-defined]
    for line in code.splitlines():
        m = re.match(r"(run\.\w+(?:\[0\]\.\w+)?)\s+# '(.*)'$", line)
        if m:
            assert eval(m.group(1), namespace) == m.group(2), line


def test_every_python_block_runs_in_order() -> None:
    """The later block (replay, fork, diff, an experiment) builds on the tour's names."""
    namespace: dict[str, object] = {}
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 2
    for code in blocks:
        exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["again"].turns[0].replayed  # type: ignore[attr-defined]
    assert len(namespace["exp"].runs) == 2 * 2  # type: ignore[attr-defined]
    divergence = namespace["run"].diff(namespace["brief"]).first_divergence  # type: ignore[attr-defined]
    assert divergence.cause == "agent"


def test_the_readme_names_the_two_commands() -> None:
    text = README.read_text()
    assert "jupyter lab notebooks/01_quickstart.ipynb" in text
    assert "bash .ci/run" in text


def test_the_readme_is_short_and_points_into_the_docs() -> None:
    """At most 200 lines; every relative link names a file that exists; it says how to serve
    the documentation."""
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if not link.startswith(("http://", "https://"))]
    assert "docs/getting-started.md" in local
    for link in local:
        assert (ROOT / link).exists(), link
    assert ".venv/bin/mkdocs serve" in text
