"""Faces served lazily: a package's `__init__` names what it offers, and each name is imported
from its module on first use (PEP 562), so that importing one module of a package does not load
the rest of it (`import thena_nb` stays light; `tests/test_import_cost.py`).

Example:
    >>> from thena_nb.core import runs
    >>> runs.Run.__module__
    'thena_nb.core.runs.run'
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_face"]


def lazy_face(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of the face `package`, which serves each name of
    `exports` (name -> the module of `package` that defines it) on first use."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)  # served once, then a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted({*exports, *vars(sys.modules[package])})

    return __getattr__, __dir__
