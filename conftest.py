"""Shared test set-up: asyncio for async tests, no API keys, a throwaway default store."""

from __future__ import annotations

import pytest


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
