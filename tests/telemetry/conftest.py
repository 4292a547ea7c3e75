"""Telemetry tests also talk to the local API servers of the model adapter tests."""

from __future__ import annotations

import sys
from pathlib import Path

MODELS_TESTS = str(Path(__file__).resolve().parents[1] / "models")
if MODELS_TESTS not in sys.path:
    sys.path.append(MODELS_TESTS)
