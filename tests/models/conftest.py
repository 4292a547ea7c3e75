"""Fixtures for the model adapter tests: a Messages API server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from messages_api_server import MessagesAPIServer


@pytest.fixture
def api_server() -> Iterator[MessagesAPIServer]:
    """A running `MessagesAPIServer` that accepts any API key."""
    with MessagesAPIServer() as server:
        yield server
