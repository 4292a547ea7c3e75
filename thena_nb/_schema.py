"""Arguments checked against a tool's JSON schema with `jsonschema`, as a pydantic
`ValidationError` (what reads best to a model and to a gate's edit): for tools described by
a schema, not a signature (MCP servers' tools, other frameworks' tools)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError

__all__ = ["validator"]


def _jsonschema() -> ModuleType:
    """`jsonschema`, imported without the `iri` format checker's grammar.

    `jsonschema` imports its optional format checkers as it loads; one of them,
    `rfc3987_syntax` (which Jupyter's own packages install), builds a parser at import that
    costs seconds of CPU: most of a foreign agent's or an MCP server's first run. thena_nb
    checks no formats, so the import is kept out for the time `jsonschema` loads (an
    `ImportError` it expects), and put back as it was.
    """
    if "jsonschema" in sys.modules:
        return sys.modules["jsonschema"]
    keep_out = "rfc3987_syntax" not in sys.modules
    if keep_out:
        sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]
    try:
        import jsonschema
    finally:
        if keep_out:
            del sys.modules["rfc3987_syntax"]
    module: ModuleType = jsonschema  # an untyped import: `Any` to mypy
    return module


jsonschema = _jsonschema()


def validator(name: str, schema: dict[str, Any]) -> Callable[[dict[str, Any]], None] | None:
    """A check of a call's arguments against `schema` that raises `ValidationError`; `None`
    for a schema `jsonschema` cannot read (the check is then left to whoever runs the tool).

    Example:
        >>> check = validator("add", {"type": "object", "required": ["a"],
        ...                           "properties": {"a": {"type": "integer"}}})
        >>> check({"a": 1})
        >>> check({"a": "one"})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydantic_core._pydantic_core.ValidationError: 1 validation error for add arguments
        a
          'one' is not of type 'integer' ...
    """
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
    except jsonschema.SchemaError:
        return None
    checker = cls(schema)

    def validate(arguments: dict[str, Any]) -> None:
        found = checker.iter_errors(arguments)
        errors = sorted(found, key=lambda e: [str(p) for p in e.absolute_path])
        if errors:
            details = [
                InitErrorDetails(
                    type=PydanticCustomError("json_schema", e.message),
                    loc=tuple(e.absolute_path),
                    input=e.instance,
                )
                for e in errors
            ]
            raise ValidationError.from_exception_data(f"{name} arguments", details)

    return validate
