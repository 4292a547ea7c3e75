"""A plain `pytest` stays offline: the tests that download packages (the Binder build) are
marked `binder` and left out unless `-m` names the marker (`conftest.py`); `.ci/run` names it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]
BINDER_TESTS = REPO / "tests" / "notebooks" / "test_binder.py"
SAMPLE = """
import pytest

@pytest.mark.binder
def test_downloads():
    pass

@pytest.mark.browser
def test_drives_a_browser():
    pass

def test_offline():
    pass
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    """A suite of three tests under the repository's own `conftest.py` and markers."""
    pytester.makeconftest((REPO / "conftest.py").read_text())
    pytester.makeini(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
        "markers =\n    binder: downloads\n    browser: a browser\n"
    )
    pytester.makepyfile(test_sample=SAMPLE)
    return pytester


@pytest.mark.parametrize(
    ("args", "ran"),
    [
        ((), {"test_drives_a_browser", "test_offline"}),
        (("-m", "not browser"), {"test_offline"}),
        (("-m", "binder"), {"test_downloads"}),
        (
            ("-m", "binder or not binder"),
            {"test_downloads", "test_drives_a_browser", "test_offline"},
        ),
    ],
    ids=["plain", "not-browser", "binder", "everything"],
)
def test_the_binder_tests_run_only_when_the_marker_is_named(
    suite: pytest.Pytester, args: tuple[str, ...], ran: set[str]
) -> None:
    recorded = suite.inline_run("-p", "no:cacheprovider", *args)
    passed, skipped, failed = recorded.listoutcomes()
    assert (skipped, failed) == ([], [])
    assert {report.nodeid.split("::")[-1] for report in passed} == ran


def test_every_test_that_builds_the_binder_env_is_marked() -> None:
    tree = ast.parse(BINDER_TESTS.read_text())
    builders = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and node.name.startswith("test_")
        and "binder_env" in [a.arg for a in node.args.args]
    ]
    assert len(builders) == 2
    for node in builders:
        marks = [ast.unparse(d) for d in node.decorator_list]
        assert "pytest.mark.binder" in marks, node.name


def test_ci_runs_the_binder_tests() -> None:
    script = (REPO / ".ci" / "run").read_text()
    main = [line for line in script.splitlines() if line.startswith(".venv/bin/python -m pytest")]
    assert any('-m "binder or not binder"' in line for line in main), main
