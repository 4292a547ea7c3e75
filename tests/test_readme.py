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


def test_the_readme_names_the_two_commands() -> None:
    text = README.read_text()
    assert "jupyter lab notebooks/01_quickstart.ipynb" in text
    assert "bash .ci/run" in text
