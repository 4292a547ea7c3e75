"""What a model adapter implements: the `Model` protocol and the request and reply records."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from thena_nb.core.records.types import Messages, ToolCall

__all__ = ["Model", "ModelRequest", "Reply", "ToolSpec", "render_request"]


class ToolSpec(BaseModel):
    """A tool as a model sees it: name, description and JSON schema of its arguments."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ModelRequest(BaseModel):
    """Everything a model needs for one call.

    `agent` is the asking agent: assistant messages whose `agent` differs were written by
    other agents, and an adapter shows them as attributed user text.
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", arbitrary_types_allowed=True, defer_build=True
    )

    agent: str
    system: str = ""
    messages: Messages = Field(default_factory=list)
    tools: list[ToolSpec] = Field(default_factory=list)
    max_tokens: int = 1024
    model: str = ""
    """The name of the model it is sent to (`Model.name`); an adapter calls its own model."""
    on_text_delta: Callable[[str], None] | None = Field(default=None, exclude=True, repr=False)
    """Streaming adapters call this with each piece of text as it arrives."""


_TokenCount = Annotated[int, Field(ge=0, lt=2**63)]
"""A token count: a whole number from 0 to 2**63 - 1. A negative one would shrink a run's
usage (a budget would never stop it); a larger one fits no 64-bit store nor frame."""


class Reply(BaseModel):
    """What a model answered: text, native tool calls, finish reason and token counts.

    Token counts are whole numbers from 0 to 2**63 - 1; any other is refused when the reply
    is made (a turn whose model made one fails with a `ModelError` naming the model and the
    turn).

    Example:
        >>> Reply(text="hi", input_tokens=-1)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydantic_core._pydantic_core.ValidationError: 1 validation error for Reply
        input_tokens
          Input should be greater than or equal to 0 ...
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    input_tokens: _TokenCount = 0
    output_tokens: _TokenCount = 0
    cache_read_tokens: _TokenCount = 0
    cache_write_tokens: _TokenCount = 0
    reasoning: str | None = None
    """The model's reasoning, apart from `text`; `None` when it showed none."""
    reasoning_tokens: _TokenCount = 0
    reasoning_blocks: tuple[dict[str, Any], ...] = Field(default=(), repr=False)
    response_model: str | None = None
    """The model the API says answered (e.g. the dated snapshot behind a requested alias),
    when it says one; the model asked for is the adapter's `name`."""
    response_id: str | None = None
    """The id the API gave this answer, when it gives one."""
    """The provider's own reasoning blocks, kept as it sent them (e.g. the Messages API's
    `thinking` blocks with their signatures), for the adapter to send back unchanged."""


@runtime_checkable
class Model(Protocol):
    """A chat model thena_nb can call.

    Raise `TransientModelError` for a failure worth retrying; the executor retries it and
    records every attempt. Any other exception is final.

    A model may also have `render(request) -> dict`: what it puts on the wire for a request
    (no key or auth header in it), which `run.wire_request_of(turn)` shows. It is optional
    and not part of the protocol; without it `render_request` is used.
    """

    name: str

    async def respond(self, request: ModelRequest) -> Reply:
        """Answer one request."""
        ...


def render_request(request: ModelRequest) -> dict[str, Any]:
    """The wire form of a request for a model with no `render` of its own (offline models):
    the messages, the system prompt and the tool specs as JSON data.

    Example:
        >>> from thena_nb.core.records.types import Message
        >>> request = ModelRequest(agent="A", system="Be brief.",
        ...                        messages=[Message(role="user", content="hi")])
        >>> wire = render_request(request)
        >>> wire["system"], wire["messages"][0]["content"], wire["tools"]
        ('Be brief.', 'hi', [])
    """
    return {
        "messages": [m.model_dump(mode="json") for m in request.messages],
        "system": request.system,
        "tools": [spec.model_dump(mode="json") for spec in request.tools],
    }
