"""Makes `tests/` importable (shared helpers live in `tests/helpers.py`)."""
