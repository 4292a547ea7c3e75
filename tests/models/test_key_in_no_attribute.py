"""The API key is in no attribute reachable from what the OpenAI-compatible adapter raises:
every object the exception chain holds (private attributes too, e.g. the HTTP client's
`_request` on a transport error) is walked, and the key is found in none of its texts, for
each kind of failure: a status error, a timeout, a dropped connection, nothing listening."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from chat_completions_server import ChatCompletionsServer, Drop, Fault, Slow

from thena_nb import Message
from thena_nb.models import ModelError, ModelRequest, OpenAICompatModel

pytestmark = pytest.mark.anyio

KEY = "plain-walked-key-4f8a2c6e0b"
"""Not shaped like an `sk-` key, so only the adapter naming its own key can catch it."""

REQUEST = ModelRequest(messages=[Message(role="user", content="hi")], agent="A")


def texts(root: object, limit: int = 20_000) -> Iterator[str]:
    """The text of every str, bytes and object reachable from `root` through attributes
    (`__dict__` and `__slots__`, private ones too), containers and exception links."""
    seen: set[int] = set()
    todo: list[object] = [root]
    while todo and len(seen) < limit:
        obj = todo.pop()
        if id(obj) in seen or obj is None:
            continue
        seen.add(id(obj))
        if isinstance(obj, str):
            yield obj
            continue
        if isinstance(obj, bytes | bytearray):
            yield bytes(obj).decode("latin-1")
            continue
        if isinstance(obj, int | float | bool | type):
            continue
        with contextlib.suppress(Exception):  # a repr that fails shows nothing
            yield repr(obj)
        if isinstance(obj, dict):
            todo.extend(obj.keys())
            todo.extend(obj.values())
            continue
        if isinstance(obj, list | tuple | set | frozenset):
            todo.extend(obj)
            continue
        if isinstance(obj, BaseException):
            todo.extend([obj.__cause__, obj.__context__, obj.args])
        todo.extend(_attributes(obj))


def _attributes(obj: object) -> list[object]:
    out: list[object] = []
    held = getattr(obj, "__dict__", None)
    if isinstance(held, dict):
        out.extend(held.values())
    for cls in type(obj).__mro__:
        for name in getattr(cls, "__slots__", ()):
            try:
                out.append(object.__getattribute__(obj, name))
            except AttributeError:
                continue
    if hasattr(obj, "items") and hasattr(obj, "raw"):  # HTTP headers: the raw pairs
        with contextlib.suppress(Exception):
            out.append(list(obj.raw))
    return out


async def failure(script: Any, *, listening: bool = True) -> ModelError:
    with ChatCompletionsServer() as server:
        if script is not None:
            server.add(script)
        url = server.base_url
        model = OpenAICompatModel("m", base_url=url, api_key=KEY, timeout=0.5)
        if listening:
            with pytest.raises(ModelError) as info:
                await model.respond(REQUEST)
            assert KEY in server.requests[-1].headers["authorization"]  # it was sent
            return info.value
    with pytest.raises(ModelError) as info:
        await model.respond(REQUEST)
    return info.value


@pytest.mark.parametrize(
    "script", [Fault(401, "bad key"), Fault(500, "boom"), Slow(3.0), Drop()], ids=repr
)
async def test_the_key_is_in_no_attribute_of_the_chain(script: Any) -> None:
    exc = await failure(script)
    found = [t for t in texts(exc) if KEY in t]
    assert found == []


async def test_the_key_is_in_no_attribute_when_nothing_listens() -> None:
    exc = await failure(None, listening=False)
    assert [t for t in texts(exc) if KEY in t] == []


async def test_the_key_is_in_no_log_record_of_the_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG):
        exc = await failure(Drop())
    assert exc is not None
    for record in caplog.records:
        assert KEY not in record.getMessage()
        assert [t for t in texts(record.__dict__) if KEY in t] == []
