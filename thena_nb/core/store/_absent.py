"""Why the last look-up of the default store gave none: turned off, or a file that could not
be opened. `default.py` says it; `core/_portals.py` reads it for its error, without
importing the store (which would make an import cycle)."""

from __future__ import annotations

__all__ = ["why", "why_none"]

why: list[str] = ["THENA_NB_STORE is 'off'"]
"""One item: the reason `default.default_store()` gave last when it returned `None`."""


def why_none() -> str:
    """Why the default store is absent, as the last look-up found it."""
    return why[0]
