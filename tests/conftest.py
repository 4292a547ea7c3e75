"""Shared test set-up: asyncio for async tests, no API keys, doctest names."""

from __future__ import annotations

import pytest

import thena_nb
from thena_nb import models


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _clean_environ(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test may reach a real API by accident, or write runs into the user's own store."""
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    store = tmp_path_factory.getbasetemp() / "default-store" / "runs.sqlite3"
    monkeypatch.setenv("THENA_NB_STORE", str(store))


@pytest.fixture(autouse=True)
def _doctest_names(doctest_namespace: dict[str, object]) -> None:
    for name in thena_nb.__all__:
        doctest_namespace[name] = getattr(thena_nb, name)
    doctest_namespace["ScriptedModel"] = models.ScriptedModel
    doctest_namespace["reply"] = models.reply
