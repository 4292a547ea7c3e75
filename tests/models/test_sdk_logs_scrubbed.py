"""The SDKs' own DEBUG logging never shows an adapter's key: with the `openai`, `anthropic` and
HTTP client loggers at DEBUG, a call that succeeds and one whose server echoes the key back (in
a response header, which both SDKs log) leave records, and no formatted record holds the key.
Both adapters go through the one scrubber (`models/_scrubbed.py`, `scrub_sdk_logs`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from chat_completions_server import ChatCompletionsServer, Completion, Fault
from messages_api_server import MessagesAPIServer, echo_key, text

from thena_nb import Message
from thena_nb.models import AnthropicModel, ModelError, ModelRequest, OpenAICompatModel

pytestmark = pytest.mark.anyio

KEY = "plain-logged-key-3e9b7d1a5c"
"""Not shaped like an `sk-` key, so only the adapter naming its own key can catch it."""

REQUEST = ModelRequest(messages=[Message(role="user", content="hi")], agent="A")

_LOGGERS = ("openai", "anthropic", "httpx", "httpx2", "httpcore")


class _Kept(logging.Handler):
    """Every record, formatted as a handler with a plain formatter shows it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.shown: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.shown.append(self.format(record))


@pytest.fixture
def kept() -> Iterator[_Kept]:
    handler = _Kept()
    loggers = [logging.getLogger(name) for name in _LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
        logger.addHandler(handler)
    try:
        yield handler
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(level)


def _assert_scrubbed(kept: _Kept) -> None:
    assert kept.shown  # the SDK did log at DEBUG
    assert [line for line in kept.shown if KEY in line] == []
    assert any("***" in line for line in kept.shown)  # the echoed key was there, replaced


async def test_openai_sdk_debug_logs_never_show_the_key(kept: _Kept) -> None:
    with ChatCompletionsServer() as server:
        echoed = Fault(401, "bad key", headers={"x-request-id": KEY})  # logged as request_id
        server.add(Completion(content="hello"), echoed)
        model = OpenAICompatModel("qwen-test", base_url=server.base_url, api_key=KEY)
        assert (await model.respond(REQUEST)).text == "hello"
        with pytest.raises(ModelError):
            await model.respond(REQUEST)
        assert KEY in server.requests[-1].headers["authorization"]  # it was sent
    _assert_scrubbed(kept)


async def test_anthropic_sdk_debug_logs_never_show_the_key(kept: _Kept) -> None:
    with MessagesAPIServer() as server:
        server.script(text("hello"), echo_key(401))  # the response headers are logged
        model = AnthropicModel("claude-test", base_url=server.base_url, api_key=KEY)
        assert (await model.respond(REQUEST)).text == "hello"
        with pytest.raises(ModelError):
            await model.respond(REQUEST)
    _assert_scrubbed(kept)
