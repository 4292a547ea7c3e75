"""The README's tour runs and says the truth."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


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
    """The later blocks (replay, fork, resume, experiments) build on the tour's names."""
    namespace: dict[str, object] = {}
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    runnable = [b for b in blocks if "AnthropicModel(" not in b]  # needs a real key
    assert len(runnable) >= 3
    for code in runnable:
        exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["again"].turns[0].replayed  # type: ignore[attr-defined]
    assert len(namespace["exp"].runs) == 3 * 4  # type: ignore[attr-defined]


def test_the_readme_names_the_two_commands() -> None:
    text = README.read_text()
    assert "jupyter lab notebooks/01_quickstart.ipynb" in text
    assert "bash .ci/run" in text
