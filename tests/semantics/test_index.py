"""Every rule S1–S28 has at least one test named after it."""

from __future__ import annotations

import re
from pathlib import Path


def test_every_semantics_rule_has_a_test() -> None:
    """Each of S1..S28 has a `test_sNN_...` in tests/semantics."""
    names = set()
    for path in Path(__file__).parent.glob("test_*.py"):
        names.update(re.findall(r"def test_s(\d+)_", path.read_text()))
    missing = [n for n in range(1, 29) if str(n) not in names]
    assert missing == [], f"rules without a test: {[f'S{n}' for n in missing]}"
