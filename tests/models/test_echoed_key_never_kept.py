"""A server that echoes the API key in an error (its body, a field of its own, a header):
the key reaches none of what a run keeps or shows, for both adapters, through the one
scrubber (`core/records/_secrets.py`).

Where it is looked for: the `ModelError` (str, repr), `run.error`, the report tree, the run's
JSON and HTML, the SQLite file (with its WAL), the formatted traceback with its whole
`__cause__` / `__context__` chain, and everything the chained SDK exception keeps (`body`,
`message`, `args`, the HTTP response and request with their headers and body).
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chat_completions_server import ChatCompletionsServer, Completion, Fault
from messages_api_server import MessagesAPIServer, echo_key, tool_use

from thena_nb import Agent, ModelError, Workflow, loop, tool, until_answered
from thena_nb.core.records._secrets import exception_chain
from thena_nb.models import AnthropicModel, OpenAICompatModel
from thena_nb.store import SqliteRunStore

pytestmark = pytest.mark.anyio

ANTHROPIC_KEY = "sk-ant-echoed-5d1e8a2f9c"
OPENAI_KEY = "plain-echoed-key-7b3c9e1d"
"""Not shaped like an `sk-` key, so only the adapter naming its own key can catch it."""


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _workflow(model: Any) -> Workflow:
    agent = Agent("Calc", model=model, tools=[add], rescue=False)
    return Workflow("echo", [loop(steps=[agent], until=until_answered, max_iterations=3)])


def _held(exc: BaseException) -> Iterator[str]:
    """Every text an exception and its chain show or keep."""
    yield str(exc)
    yield repr(exc)
    yield "".join(traceback.format_exception(exc))
    for current in exception_chain(exc):
        yield repr(current.args)
        yield repr(vars(current))
        for name in ("response", "request"):
            message = vars(current).get(name)
            if message is None:
                continue
            yield repr(dict(message.headers))
            yield str(getattr(message, "url", ""))
            if hasattr(message, "status_code"):
                yield message.text


def _stored(tmp_path: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(tmp_path.glob("runs.db*")))


async def _failed_run(wf: Workflow, tmp_path: Path) -> tuple[ModelError, Any]:
    store = SqliteRunStore(tmp_path / "runs.db")
    try:
        with pytest.raises(ModelError) as info:
            await wf.arun("2 + 3?", store=store)
    finally:
        store.close()
    return info.value, info.value.run  # type: ignore[attr-defined]


def _assert_nowhere(key: str, exc: ModelError, run: Any, tmp_path: Path) -> None:
    assert run.status == "failed" and len(run.turns) == 1  # the first turn was stored
    shown = [
        *_held(exc),
        str(run.error),
        run.report.model_dump_json(),
        run.to_json(),
        run._repr_html_(),
    ]
    for text in shown:
        assert key not in text
    assert key.encode() not in _stored(tmp_path)
    assert "***" in str(exc)  # the echoed key was there, and was replaced


@pytest.mark.parametrize("code", [401, 400])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_anthropic_key_echoed_in_an_error_body_is_kept_nowhere(
    tmp_path: Path, code: int, stream: bool
) -> None:
    with MessagesAPIServer() as server:
        server.script(tool_use("add", {"a": 2, "b": 3}), echo_key(code))
        model = AnthropicModel(
            "claude-test", base_url=server.base_url, api_key=ANTHROPIC_KEY, stream=stream
        )
        exc, run = await _failed_run(_workflow(model), tmp_path)
        sent = server.requests[-1].headers
        assert ANTHROPIC_KEY in (sent.get("x-api-key") or sent["authorization"])  # it was sent
    assert exc.status_code == code
    cause: Any = exc.__cause__
    assert cause.body["received_key"] == "***"
    assert cause.response.headers["x-echoed-key"] == "***"
    request_headers = cause.response.request.headers
    assert {request_headers.get(name) for name in ("x-api-key", "authorization")} <= {
        "***",
        None,
    }
    _assert_nowhere(ANTHROPIC_KEY, exc, run, tmp_path)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_openai_compat_key_echoed_in_an_error_body_is_kept_nowhere(
    tmp_path: Path, stream: bool
) -> None:
    with ChatCompletionsServer() as server:

        def echo(body: dict[str, Any]) -> Fault:
            sent = server.requests[-1].headers["authorization"]
            return Fault(401, f"bad key {sent}", headers={"x-echoed-key": sent})

        server.add(Completion(tool_calls=(("call_1", "add", {"a": 2, "b": 3}),)), echo)
        model = OpenAICompatModel(
            "qwen-test", base_url=server.base_url, api_key=OPENAI_KEY, stream=stream
        )
        exc, run = await _failed_run(_workflow(model), tmp_path)
    assert str(exc).endswith("HTTP 401: bad key Bearer ***")
    _assert_nowhere(OPENAI_KEY, exc, run, tmp_path)
