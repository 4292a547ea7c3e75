"""What the OpenAI Agents SDK tests share: the items an offline `agents.Model` answers with,
and no trace export while they run."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from agents import set_tracing_disabled
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)


@pytest.fixture(autouse=True)
def _no_trace_export() -> Iterator[None]:
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


def text(value: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg_1",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=value, annotations=[])],
    )


def call(call_id: str, name: str, arguments: dict[str, Any]) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id=f"fc_{call_id}",
        type="function_call",
        call_id=call_id,
        name=name,
        arguments=json.dumps(arguments),
    )


Answer = Callable[[str | None, list[dict[str, Any]]], list[Any]]
