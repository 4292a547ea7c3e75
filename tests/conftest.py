"""Makes `tests/` importable (shared helpers live in `tests/helpers.py`), and the local API
servers of `tests/models/` importable from the other layers' tests that talk to them."""

from __future__ import annotations

import sys
from pathlib import Path

MODELS_TESTS = str(Path(__file__).resolve().parent / "models")
if MODELS_TESTS not in sys.path:
    sys.path.append(MODELS_TESTS)
