"""A griffe extension for the API reference: docstrings' `Example:` sections as examples.

The package's docstrings title their doctests `Example:`; griffe's Google parser takes only
`Examples:` as an examples section (and renders a singular title as an admonition, its
doctest lines as prose). This renames the title before the docstring is parsed.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_TITLE = re.compile(r"^(\s*)Example:[ \t]*$", re.M)


class ExampleSections(griffe.Extension):
    """Read an `Example:` section of a docstring as `Examples:`."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rename the section title of `obj`'s docstring, if it has one."""
        if obj.docstring is not None:
            obj.docstring.value = _TITLE.sub(r"\1Examples:", obj.docstring.value)
