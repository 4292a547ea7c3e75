"""What `import thena_nb` defers to first use, checked in fresh interpreters.

Defining a workflow needs neither the machinery that runs one (asyncio, sessions, the
executor, the stores) nor gates, events, reports or diffs, and no record's validator:
`thena_nb/__init__.py` serves those names on first use (PEP 562), `Workflow`'s running
methods import the machinery when called, and the records are `defer_build` pydantic
models. `benchmarks/import_cost.py` measures what this saves.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import thena_nb

DEFERRED_MODULES = [
    "asyncio",
    "importlib.metadata",  # pydantic loads it to find plugins when it builds a validator
    "thena_nb.core.engine._aio",
    "thena_nb.core.engine._executor",
    "thena_nb.core.engine._turn",
    "thena_nb.experiments.cases",
    "thena_nb.core.runs.diff",
    "thena_nb.core.records.events",
    "thena_nb.core.engine.gates",
    "thena_nb.core.records.report",
    "thena_nb.core.runs.run",
    "thena_nb.core.engine.session",
    "thena_nb.core.store.base",
    "thena_nb.core.runs.what_if",
]
USER_LINE = (
    "from thena_nb import Agent, Workflow, loop, tool, until_answered\n"
    "from thena_nb.models import FunctionModel, reply\n"
)


def _probe(code: str, expression: str) -> object:
    """`expression` evaluated after `code` in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint(repr({expression}))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return eval(out.stdout.strip())  # a literal printed by the probe


def _loaded(code: str) -> list[str]:
    return _probe(code, f"[m for m in {DEFERRED_MODULES!r} if m in sys.modules]")  # type: ignore[return-value]


def test_import_thena_nb_loads_no_run_machinery_nor_asyncio() -> None:
    assert _loaded("import thena_nb") == []


def test_the_usual_imports_and_a_definition_load_no_asyncio() -> None:
    code = (
        USER_LINE + "agent = Agent('A', model=FunctionModel(lambda r: 'hi'))\n"
        "wf = Workflow('w', [loop(steps=[agent], until=until_answered)])\n"
    )
    assert "asyncio" not in _loaded(code)


def test_a_run_loads_what_it_needs() -> None:
    code = (
        USER_LINE + "wf = Workflow('w', [Agent('A', model=FunctionModel(lambda r: 'hi'))])\n"
        "assert wf.run('go', store=False).output == 'hi'\n"
    )
    loaded = _loaded(code)
    assert {"asyncio", "thena_nb.core.engine.session", "thena_nb.core.engine._turn"} <= set(loaded)


def test_import_thena_nb_builds_no_record_validator() -> None:
    built = _probe(
        "import thena_nb",
        "[n for n in ('Message', 'Turn', 'ToolCall', 'Usage', 'Budget') "
        "if getattr(sys.modules['thena_nb'], n).__pydantic_complete__]",
    )
    assert built == []


@pytest.mark.parametrize("name", sorted(thena_nb._LAZY))
def test_a_deferred_name_is_served_and_listed(name: str) -> None:
    value = getattr(thena_nb, name)
    assert value.__name__ == name
    assert name in dir(thena_nb) and name in thena_nb.__all__
    module = _probe(f"from thena_nb import {name}", f"{name}.__module__")
    assert module == thena_nb._LAZY[name]


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Sesion'"):
        thena_nb.Sesion  # type: ignore[attr-defined]  # noqa: B018


def test_schema_checks_load_jsonschema_without_the_iri_grammar() -> None:
    """`jsonschema` loads its optional `iri` checker's grammar as it imports, seconds of CPU;
    thena_nb checks no formats: the import is kept out, and put back for the user's code."""
    probe = _probe(
        "import thena_nb._schema as s\nassert s.validator('t', {'type': 'object'}) is not None",
        "('jsonschema' in sys.modules, 'rfc3987_syntax' in sys.modules)",
    )
    assert probe == (True, False)
    after = _probe(
        "import thena_nb._schema\nimport importlib.util",
        "importlib.util.find_spec('rfc3987_syntax') is None or "
        "__import__('rfc3987_syntax') is not None",
    )
    assert after is True  # still importable by whoever wants it
