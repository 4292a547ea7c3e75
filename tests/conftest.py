"""Shared test set-up: asyncio for async tests, no API keys, doctest names."""

from __future__ import annotations

import pytest

import thena_nb
from thena_nb import models


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach a real API by accident."""
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "THENA_NB_STORE"):
        monkeypatch.delenv(key, raising=False)


@pytest.fixture(autouse=True)
def _doctest_names(doctest_namespace: dict[str, object]) -> None:
    for name in thena_nb.__all__:
        doctest_namespace[name] = getattr(thena_nb, name)
    doctest_namespace["ScriptedModel"] = models.ScriptedModel
    doctest_namespace["reply"] = models.reply
