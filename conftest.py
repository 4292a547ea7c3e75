"""Shared test set-up: asyncio for async tests, no API keys, a throwaway default store, and
the tests that download (marked `binder`) left out unless `-m` names their marker."""

from __future__ import annotations

import pytest

# The shipped store contract suite (`thena_nb.store_contract`): its failures show the values.
pytest.register_assert_rewrite("thena_nb.store_contract")

DOWNLOADING = "binder"
"""The marker of the tests that download packages: a plain `pytest` stays offline."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the `binder` tests unless the `-m` expression names the marker (`-m binder`,
    or `-m "binder or not binder"` for everything, as `.ci/run` runs it)."""
    if DOWNLOADING in (config.option.markexpr or ""):
        return
    left_out = [item for item in items if item.get_closest_marker(DOWNLOADING)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if not item.get_closest_marker(DOWNLOADING)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _clean_environ(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """No test may reach a real API by accident, or write runs into the user's own store."""
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    store = tmp_path_factory.getbasetemp() / "default-store" / "runs.sqlite3"
    monkeypatch.setenv("THENA_NB_STORE", str(store))
