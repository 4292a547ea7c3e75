"""The shipped store contract suite, run as a store's author runs it: in a project of its
own, with the two files `thena_nb.store_contract`'s docstring shows, word for word."""

from __future__ import annotations

import re

import pytest

import thena_nb.store_contract

pytest_plugins = ["pytester"]

MY_PACKAGE = '''
from thena_nb.store import SqliteRunStore


class MyStore(SqliteRunStore):
    """A third party's store: SQLite, opened on a path, closed by `with`."""
'''
FORGETFUL_CONFTEST = '''
import pytest

from thena_nb.store import MemoryRunStore


class ForgetfulStore(MemoryRunStore):
    """A store in memory whose `delete` forgets nothing."""

    def delete(self, run_id):
        pass


@pytest.fixture
def store():
    return ForgetfulStore()


@pytest.fixture
def reader(store):
    return store
'''


def documented_files() -> tuple[str, str]:
    """The `conftest.py` and the test module of the suite's docstring."""
    blocks = re.findall(r"```python\n(.*?)```", thena_nb.store_contract.__doc__ or "", re.S)
    assert len(blocks) == 2, blocks
    return blocks[0], blocks[1]


def test_a_store_of_your_own_runs_the_suite_as_the_docstring_says(
    pytester: pytest.Pytester,
) -> None:
    conftest, module = documented_files()
    assert module.strip() == "from thena_nb.store_contract import *  # noqa: F403"
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(my_package=MY_PACKAGE)
    pytester.syspathinsert()
    for folder, conftest_text, test_name in [
        ("mine", conftest, "test_my_store"),
        ("forgetful", FORGETFUL_CONFTEST, "test_forgetful_store"),
    ]:
        pytester.mkdir(folder)
        (pytester.path / folder / "conftest.py").write_text(conftest_text)
        (pytester.path / folder / f"{test_name}.py").write_text(module)
    passed, skipped, failed = pytester.inline_run("-p", "no:cacheprovider").listoutcomes()
    suite = set(thena_nb.store_contract.__all__)
    # (anyio's default `anyio_backend` fixture adds `[asyncio]` to the async tests' ids)
    mine = {r.nodeid.split("::")[-1].split("[")[0] for r in passed if r.nodeid.startswith("mine/")}
    assert mine == suite and skipped == []
    # The suite finds a store that does not keep the contract: this one's `delete` is a no-op.
    assert [r.nodeid for r in failed] == [
        "forgetful/test_forgetful_store.py::test_unknown_runs_and_delete"
    ]
    assert "assert [{" in str(failed[0].longrepr)  # the values shown: assertions rewritten
    assert len(passed) == 2 * len(suite) - 1
