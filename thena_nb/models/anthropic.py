"""`AnthropicModel`: Claude through the official `anthropic` SDK's Messages API.

The workflow's history is shared by its agents; the Messages API wants one conversation
between one user and one assistant. `request_params` bridges the two:

- the asking agent's own turns are `assistant` messages: its text, then a `tool_use` block
  per native call; each result is a `tool_result` block (with `is_error` for a failed call)
  in the `user` message right after, when it stands right after its call in the history
  (`_wire`: where a tool result may stand); any other of its calls is written as text
  (``(called `f` with {...}; no result)``), and its result is `user` text where it stands;
- a call's arguments, as `input` or as text, keep the model's own key order;
- other agents' turns and tool results are attributed `user` text (`[SecurityAgent] ...`);
- rescued calls (found in the model's text) have no API id: the text carries the call and
  the result comes back as `user` text;
- same-role neighbours are merged, `tool_result` blocks go first in their message, and a
  continuation message follows when the history ends with the model's own answer;
- with `thinking=` on, the asking agent's own turns start with the `thinking` and
  `redacted_thinking` blocks the API sent (`Message.reasoning_blocks`), unchanged, as the
  API requires of a turn that thought and called tools; such a turn is never merged into
  the assistant message before it (the continuation prompt it answered stands between).

`AnthropicModel.render` is the one place a request becomes the keyword arguments of
`messages.create`; `respond` sends exactly what it returns.

The rules it shares with `OpenAICompatModel` (whose message is whose, attributed text,
results shown as text, the opening and continuation prompts) are written once in `_wire`.

SDK errors are mapped in one place, `_map_error`: 408, 409, 429, 5xx (529 overloaded),
timeouts and dropped connections raise `TransientModelError` for the executor to retry
(the SDK's own retries are off); anything else, including an answer that is not JSON or not
a message, raises a final `ModelError`. What it raises is scrubbed of the API key first
(`_scrubbed.scrubbed`), the SDK exception kept as `__cause__` included; so is what the SDK
logs (`_scrubbed.scrub_sdk_logs`).
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

try:
    import anthropic
except ImportError as _exc:  # pragma: no cover - anthropic is a dependency of thena_nb
    raise ImportError(
        "`AnthropicModel` needs the `anthropic` SDK: `pip install anthropic` "
        "(it is installed with `pip install thena_nb`)."
    ) from _exc

try:  # the transport the SDK streams over: httpx2 from anthropic 2.x, httpx before
    import httpx2 as _http
except ImportError:  # pragma: no cover - older SDKs
    import httpx as _http  # type: ignore[no-redef]

from pydantic import ValidationError

from thena_nb.core.engine._reply_check import refused_reply
from thena_nb.core.records._secrets import redact_url
from thena_nb.core.records.errors import ModelError, TransientModelError
from thena_nb.core.records.model import ModelRequest, Reply
from thena_nb.core.records.types import Message, ToolCall
from thena_nb.models._pools import LoopClients, ssl_context
from thena_nb.models._retry import status_error, transient_status
from thena_nb.models._scrubbed import scrub_sdk_logs, scrubbed
from thena_nb.models._wire import (
    CONTINUE_PROMPT,
    START_PROMPT,
    CallsById,
    Resumes,
    answered_call,
    answered_ids,
    attributed_turn,
    dumps,
    frame,
    last_assistant,
    listed,
    native_calls,
    note_calls,
    owns,
    plain_copy,
    read,
    result_text,
)

__all__ = ["CONTINUE_PROMPT", "START_PROMPT", "AnthropicModel", "map_history", "request_params"]

Block = dict[str, Any]
Role = Literal["user", "assistant"]

_EPHEMERAL: Block = {"type": "ephemeral"}
_REASONING = frozenset({"thinking", "redacted_thinking"})
"""The types of the reasoning blocks the API wants back unchanged."""
_ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
"""An error sent inside a 200 SSE stream has only its type; this gives it a status."""
_HINTS = {
    401: " Check the API key: set `ANTHROPIC_API_KEY` or pass `api_key=`.",
    403: " The API key is not allowed to use this model or feature.",
    404: " Check the model name.",
    413: " The request is too large: trim the history, e.g. `history=keep_first_and_recent(n)`.",
}


class AnthropicModel:
    """A Claude model called through `anthropic.AsyncAnthropic`.

    Args:
        model: The model id, e.g. `"claude-sonnet-4-5"`; also the model's `name`.
        api_key: The API key; `ANTHROPIC_API_KEY` when not given. It never appears in a
            repr, record or error.
        base_url: Another endpoint speaking the Messages API.
        client: A configured `AsyncAnthropic` to use instead (its retries are turned off).
        timeout: Seconds to wait for a reply (between chunks when streaming).
        cache: Put prompt-caching breakpoints on the stable prefix of every request.
        stream: Stream the reply, calling `request.on_text_delta` as text arrives.
        thinking: Extended thinking, passed to the API as it is, e.g.
            `{"type": "enabled", "budget_tokens": 2048}` (less than the agent's
            `max_tokens`). The thinking text becomes `turn.reasoning`, never the response;
            its blocks go back to the API with the turn that made them.

    Example:
        >>> AnthropicModel("claude-sonnet-4-5", stream=True)
        AnthropicModel('claude-sonnet-4-5', stream=True)
        >>> AnthropicModel("claude-sonnet-4-5", thinking={"type": "enabled", "budget_tokens": 2048})
        AnthropicModel('claude-sonnet-4-5', thinking={'type': 'enabled', 'budget_tokens': 2048})
    """

    provider: str | None = "anthropic"
    """Who bills the calls, as a genai-prices provider id, for `Turn.cost_usd`."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: anthropic.AsyncAnthropic | None = None,
        timeout: float = 60.0,
        cache: bool = True,
        stream: bool = False,
        thinking: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = model
        self.thinking = _thinking_config(model, thinking)
        self.base_url = base_url
        self.timeout = timeout
        self.cache = cache
        self.stream = stream
        self._api_key = api_key
        self._given_client = client.with_options(max_retries=0) if client is not None else None
        # An SDK client's connections belong to the event loop that opened them, and
        # `wf.run()` may start a fresh loop per run, so the client is made per loop.
        self._clients: LoopClients[anthropic.AsyncAnthropic] = LoopClients()
        self._resumes: Resumes[_Kept] = Resumes()
        scrub_sdk_logs(self._secrets())  # the SDK's own DEBUG logging

    def __repr__(self) -> str:
        args = [repr(self.name)]
        if self.base_url is not None:
            args.append(f"base_url={redact_url(self.base_url)!r}")
        if self._given_client is not None:
            args.append(f"client=<{type(self._given_client).__name__}>")
        if self.timeout != 60.0:
            args.append(f"timeout={self.timeout!r}")
        if not self.cache:
            args.append("cache=False")
        if self.stream:
            args.append("stream=True")
        if self.thinking is not None:
            args.append(f"thinking={self.thinking!r}")
        return f"AnthropicModel({', '.join(args)})"

    def render(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of `messages.create` that `respond` sends for `request`.

        Pure: no I/O, nothing changed. The API key and headers belong to the client and are
        never in it; `stream` is there when the model streams (its body says so too).

        Example:
            >>> from thena_nb.core.records.model import ModelRequest
            >>> from thena_nb.core.records.types import Message
            >>> request = ModelRequest(agent="A", messages=[Message(role="user", content="Hi")])
            >>> AnthropicModel("claude-sonnet-4-5", cache=False).render(request)["messages"]
            [{'role': 'user', 'content': [{'type': 'text', 'text': 'Hi'}]}]
        """
        return self._params(request, resumed=False)

    def _params(self, request: ModelRequest, *, resumed: bool) -> dict[str, Any]:
        """`render`; `resumed`: map only the messages new since an earlier request of the
        run (what `respond` sends: the same body, its blocks shared with the kept state)."""
        params = request_params(
            request,
            model=self.name,
            cache=self.cache,
            thinking=self.thinking,
            resumes=self._resumes if resumed else None,
        )
        if self.stream:
            params["stream"] = True
        return params

    async def respond(self, request: ModelRequest) -> Reply:
        """Send one request to the Messages API and return the reply.

        Args:
            request: The asking agent, system prompt, history, tools and `max_tokens`.

        Returns:
            The reply's text, native tool calls, stop reason and token counts.

        Raises:
            TransientModelError: A failure worth retrying (rate limit, overload, 5xx,
                timeout, dropped connection), with the server's `retry_after` if it sent one.
            ModelError: Any other failure, e.g. a rejected request or a bad API key.
        """
        client = self._client_for_running_loop(request.agent)
        params = self._params(request, resumed=True)
        try:
            if params.get("stream"):
                message = await _stream_message(client, params, request.on_text_delta)
            else:  # the body as it came: the SDK's `Message` record of it is not built
                answer = await client.messages.with_raw_response.create(**params)
                message = json.loads(answer.http_response.content)
            return _checked_reply(message)
        except (
            anthropic.AnthropicError,
            _http.TransportError,
            _IncompleteStream,
            _Malformed,
            json.JSONDecodeError,
        ) as exc:
            raise scrubbed(
                self._map_error(exc, request.agent), exc, secrets=self._secrets()
            ) from exc

    def _secrets(self) -> list[str | None]:
        """The keys this model's requests carry, to scrub from anything it raises."""
        secrets: list[str | None] = [self._api_key]
        clients = [self._given_client, *self._clients.clients()]
        for client in clients:
            if client is not None:
                secrets += [client.api_key, client.auth_token]
        return secrets

    def _client_for_running_loop(self, agent: str) -> anthropic.AsyncAnthropic:
        if self._given_client is not None:
            return self._given_client
        return self._clients.for_running_loop(lambda: self._new_client(agent))

    def _new_client(self, agent: str) -> anthropic.AsyncAnthropic:
        key = self._api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise ModelError(
                f"agent {agent!r}: `AnthropicModel({self.name!r})` has no API key. Set the "
                "`ANTHROPIC_API_KEY` environment variable or pass `api_key=`.",
                model_name=self.name,
            )
        # Our own HTTP client: the SDK's default one closes itself on whatever loop is
        # running when it is collected, which fails once its own loop has closed.
        return anthropic.AsyncAnthropic(
            api_key=key,
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=0,
            http_client=anthropic.DefaultAsyncHttpxClient(verify=ssl_context()),
            **_sdk_spans_off(),
        )

    def __getstate__(self) -> dict[str, Any]:
        """What a copy (pickle, a Ray worker) needs: the clients made for the loops this
        model ran on (live connections) stay behind; the copy makes its own on its first
        call."""
        state = dict(self.__dict__)
        del state["_clients"]
        del state["_resumes"]  # (a cache of this process's requests)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._clients = LoopClients()
        self._resumes = Resumes()
        scrub_sdk_logs(self._secrets())  # (a copy in another process: its loggers too)

    def _map_error(self, exc: BaseException, agent: str) -> ModelError:
        """The one place SDK and transport errors become `ModelError`s."""
        where = f"agent {agent!r}: model {self.name!r}"
        if isinstance(exc, anthropic.APIStatusError):
            return self._status_error(exc, where)
        if isinstance(exc, _Malformed) and isinstance(exc.__cause__, ValidationError):
            refused = refused_reply(exc.__cause__, model=self.name, agent=agent)
            if refused is not None:  # e.g. a negative token count
                return refused
        if isinstance(exc, json.JSONDecodeError | _Malformed):
            what = (
                f"not JSON ({exc.msg}, at character {exc.pos})"
                if isinstance(exc, json.JSONDecodeError)
                else f"not a Messages API message ({exc})"
            )
            return ModelError(
                f"{where}: the server's answer is {what}. Check that `base_url` points at an "
                "endpoint that speaks the Messages API.",
                model_name=self.name,
            )
        if isinstance(exc, anthropic.APITimeoutError | _http.TimeoutException):
            return TransientModelError(
                f"{where} did not answer within {self.timeout}s (timeout).", model_name=self.name
            )
        if isinstance(exc, anthropic.APIConnectionError | _http.TransportError | _IncompleteStream):
            detail = str(exc.__cause__ or exc)
            return TransientModelError(
                f"{where}: the connection failed or dropped before the reply was complete "
                f"({detail}).",
                model_name=self.name,
            )
        message = getattr(exc, "message", None) or str(exc)
        return ModelError(f"{where}: {type(exc).__name__}: {message}", model_name=self.name)

    def _status_error(self, exc: anthropic.APIStatusError, where: str) -> ModelError:
        body_error = _body_error(exc.body)
        error_type = body_error.get("type")
        api_message = body_error.get("message") or exc.message
        status = exc.status_code
        if status < 400:  # an `error` event inside a 200 stream
            status = _ERROR_TYPE_STATUS.get(str(error_type), 500)
        kind = f" ({error_type})" if error_type else ""
        text = f"{where}: the Anthropic API answered {status}{kind}: {api_message}"
        headers = exc.response.headers
        transient = _worth_retrying(headers, status)
        if not transient and status in _HINTS:
            text = f"{text.rstrip('.')}.{_HINTS[status]}"
        return status_error(
            text, status=status, model_name=self.name, headers=headers, transient=transient
        )


@functools.cache
def _sdk_spans_off() -> dict[str, Any]:
    """The SDK's own OpenTelemetry spans, off for the clients `AnthropicModel` builds (the
    SDK's releases that make them take `open_telemetry=False`; older ones make none).

    `thena_nb.telemetry` makes the one `chat` span of each call, in the conventions it
    follows; the SDK's `anthropic.messages.create` span would be a second CLIENT span of the
    same call, with its tokens counted again, whenever a global tracer provider is set. And
    the SDK works out a span's attributes on every call before it knows that nothing records
    them. A `client=` given to `AnthropicModel` keeps the settings it was made with.
    """
    parameters = inspect.signature(anthropic.AsyncAnthropic.__init__).parameters
    return {"open_telemetry": False} if "open_telemetry" in parameters else {}


def _thinking_config(model: str, thinking: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if thinking is None:
        return None
    if not isinstance(thinking, Mapping) or not isinstance(thinking.get("type"), str):
        raise ValueError(
            f"AnthropicModel({model!r}): `thinking` must be a dict with a `type`, e.g. "
            f"{{'type': 'enabled', 'budget_tokens': 2048}}; got {thinking!r}"
        )
    budget = thinking.get("budget_tokens")
    if thinking["type"] == "enabled" and (
        not isinstance(budget, int) or isinstance(budget, bool) or budget < 1
    ):
        raise ValueError(
            f"AnthropicModel({model!r}): `thinking={{'type': 'enabled'}}` needs "
            f"`budget_tokens`, a whole number of tokens below the agent's `max_tokens` "
            f"(e.g. 2048); got {budget!r}"
        )
    return copy.deepcopy(dict(thinking))


def _sends_reasoning(thinking: Mapping[str, Any] | None) -> bool:
    """Whether requests carry the model's own reasoning blocks back."""
    return thinking is not None and thinking.get("type") != "disabled"


def _worth_retrying(headers: Mapping[str, str], status: int) -> bool:
    # The API says in `x-should-retry` whether a failed request is worth sending again.
    should_retry = headers.get("x-should-retry")
    if should_retry in ("true", "false"):
        return should_retry == "true"
    return transient_status(status)


class _IncompleteStream(Exception):
    """The SSE stream ended without `message_stop`: the connection was cut."""


class _Malformed(Exception):
    """The server answered 200 with JSON that is no message (or no stream event)."""

    @classmethod
    def of(cls, exc: Exception) -> _Malformed:
        return cls(f"{type(exc).__name__}: {exc}")


_SHAPE_ERRORS = (AttributeError, TypeError, LookupError, ValueError)
"""What reading an answer's JSON (or assembling its events) raises when it is malformed."""


def _body_error(body: object) -> dict[str, Any]:
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            return error
    return {}


async def _stream_message(
    client: anthropic.AsyncAnthropic,
    params: dict[str, Any],
    on_text_delta: Callable[[str], None] | None,
) -> dict[str, Any]:
    """Stream the answer (`params` ask for it), telling `on_text_delta` each piece of text as
    it arrives; the message, as its JSON answer would be.

    The events are read as their JSON (`AsyncStream[object]`) and assembled here
    (`_StreamedMessage`): the SDK's `messages.stream` builds a record of every event and a
    record of the message so far after each, several times the cost of the rest of a call.
    """
    answer = await client.messages.with_raw_response.create(**params)
    stream = await answer.parse(to=anthropic.AsyncStream[object])
    built = _StreamedMessage()
    async with stream:
        events = aiter(stream)
        while True:
            try:  # only the stream's own failures are a malformed answer, not the listener's
                piece = built.add(await anext(events))
            except StopAsyncIteration:
                break
            except json.JSONDecodeError:
                raise
            except _SHAPE_ERRORS as exc:
                raise _Malformed.of(exc) from exc
            if piece is not None and on_text_delta is not None:
                on_text_delta(piece)
    if not built.stopped or built.message is None:
        raise _IncompleteStream("the stream ended before `message_stop`")
    return built.message


class _StreamedMessage:
    """A streamed message's events, assembled into the message its JSON answer would be,
    the way the SDK's `MessageStream` assembles its snapshot: text, thinking and signature
    deltas join their blocks, a tool's input is its JSON pieces once the block stops, and
    `message_delta` brings the stop reason and usage counts (totals, not increments)."""

    def __init__(self) -> None:
        self.message: dict[str, Any] | None = None
        self.inputs: dict[int, list[str]] = {}
        self.stopped = False

    def add(self, event: Any) -> str | None:
        """Take one event (its JSON) in; return its piece of text, when it has one."""
        kind = read(event, "type")
        if kind == "message_start":
            started = read(event, "message")
            usage = dict(read(started, "usage"))
            self.message = {**started, "content": list(read(started, "content")), "usage": usage}
            return None
        message = self.message
        if message is None:
            raise ValueError(f"a {kind!r} event came before `message_start`")
        if kind == "content_block_start":
            message["content"].append(dict(read(event, "content_block")))
        elif kind == "content_block_delta":
            return self._delta(message["content"][read(event, "index")], event)
        elif kind == "content_block_stop":
            index = read(event, "index")
            pieces = self.inputs.pop(index, None)
            if pieces and "".join(pieces):
                message["content"][index]["input"] = json.loads("".join(pieces))
        elif kind == "message_delta":
            message["stop_reason"] = read(read(event, "delta"), "stop_reason", None)
            for name, value in read(event, "usage").items():
                if value is not None:
                    message["usage"][name] = value
        elif kind == "message_stop":
            self.stopped = True
        return None

    def _delta(self, block: dict[str, Any], event: Any) -> str | None:
        delta = read(event, "delta")
        kind, block_kind = read(delta, "type"), block.get("type")
        if kind == "text_delta":
            piece: str = read(delta, "text")
            if block_kind == "text":
                block["text"] += piece
            return piece
        if kind == "input_json_delta":
            self.inputs.setdefault(read(event, "index"), []).append(read(delta, "partial_json"))
        elif kind == "thinking_delta" and block_kind == "thinking":
            block["thinking"] += read(delta, "thinking")
        elif kind == "signature_delta" and block_kind == "thinking":
            block["signature"] = read(delta, "signature")
        return None


def _checked_reply(message: object) -> Reply:
    """The reply, or `_Malformed` when the answer is not the message it should be."""
    try:
        return _reply(message)
    except _SHAPE_ERRORS as exc:
        raise _Malformed.of(exc) from exc


def _reply(message: Any) -> Reply:
    """The `Reply` in a Messages API message: the JSON body as it came (`respond`), or the
    SDK's record of a streamed one (`read` takes either)."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[Block] = []
    for block in read(message, "content"):
        kind = read(block, "type")
        if kind == "text":
            texts.append(read(block, "text"))
        elif kind == "tool_use":
            given = read(block, "input")
            arguments = given if isinstance(given, dict) else {}
            calls.append(
                ToolCall(id=read(block, "id"), name=read(block, "name"), arguments=arguments)
            )
        elif kind == "thinking":
            thinking = {"type": "thinking", "thinking": read(block, "thinking")}
            reasoning.append({**thinking, "signature": read(block, "signature")})
        elif kind == "redacted_thinking":
            reasoning.append({"type": "redacted_thinking", "data": read(block, "data")})
    usage = read(message, "usage")
    details = read(usage, "output_tokens_details", None)
    thoughts = [block["thinking"] for block in reasoning if block["type"] == "thinking"]
    return Reply(
        text="".join(texts),
        tool_calls=calls,
        finish_reason=read(message, "stop_reason", None),
        input_tokens=read(usage, "input_tokens"),
        output_tokens=read(usage, "output_tokens"),
        cache_read_tokens=read(usage, "cache_read_input_tokens", None) or 0,
        cache_write_tokens=read(usage, "cache_creation_input_tokens", None) or 0,
        reasoning="\n\n".join(thoughts) if thoughts else None,
        reasoning_tokens=read(details, "thinking_tokens", None) or 0,
        reasoning_blocks=tuple(reasoning),
        response_model=read(message, "model", None),
        response_id=read(message, "id", None),
    )


# --- history to request --------------------------------------------------------------


def request_params(
    request: ModelRequest,
    *,
    model: str,
    cache: bool = True,
    thinking: Mapping[str, Any] | None = None,
    resumes: Resumes[_Kept] | None = None,
) -> dict[str, Any]:
    """The keyword arguments of `messages.create` for one request.

    Args:
        request: The request to send.
        model: The model id.
        cache: Put `cache_control` breakpoints on the last tool, the system prompt and the
            last block of the history (three of the API's four).
        thinking: The API's `thinking` setting; when on, the asking agent's own turns
            carry their reasoning blocks back.
        resumes: Map only the messages new since an earlier request that this one
            continues, and keep where this one stands (`AnthropicModel.respond` does): the
            same messages, which share their blocks with the kept state.

    Returns:
        `model`, `max_tokens`, `messages`, and `system`, `tools` and `thinking` when there
        are any.
    """
    reasoning = _sends_reasoning(thinking)
    if resumes is None:
        messages = map_history(request.messages, request.agent, reasoning=reasoning)
    else:
        messages = _map_resumed(request.messages, request.agent, reasoning, resumes)
    tools: list[Block] = [
        _tool_param(spec.name, spec.description, spec.parameters) for spec in request.tools
    ]
    params: dict[str, Any] = {"model": model, "max_tokens": request.max_tokens}
    if thinking is not None:
        params["thinking"] = copy.deepcopy(dict(thinking))
    if request.system:
        system: Block = {"type": "text", "text": request.system}
        if cache:
            system["cache_control"] = dict(_EPHEMERAL)
        params["system"] = [system] if cache else request.system
    if tools:
        if cache:
            tools[-1]["cache_control"] = dict(_EPHEMERAL)
        params["tools"] = tools
    if cache:  # (on a copy of the block: the blocks before it may be shared, `resumes`)
        last = messages[-1]["content"]
        last[-1] = {**last[-1], "cache_control": dict(_EPHEMERAL)}
    params["messages"] = messages
    return params


def _tool_param(name: str, description: str, schema: dict[str, Any]) -> Block:
    tool: Block = {"name": name, "input_schema": plain_copy(schema)}
    if description:
        tool["description"] = description
    return tool


def map_history(history: Sequence[Message], agent: str, *, reasoning: bool = False) -> list[Block]:
    """The history as the `messages` of a request from `agent` that the API accepts.

    Args:
        history: The workflow's messages as the agent sees them.
        agent: The asking agent; assistant messages of others become attributed user text.
        reasoning: Start each of the agent's own turns with its reasoning blocks
            (`Message.reasoning_blocks`), as they came.

    Returns:
        Messages that start and end with `user`, alternate roles, and answer every
        `tool_use` with a `tool_result` at the start of the next message.
    """
    merged: list[_Merged] = []
    _merge_from(listed(history), 0, merged, {}, agent, reasoning, keep=False)
    return _framed(_paired_from(merged, 0))


_Merged = tuple[Role, list[Block]]
"""A message of the request as its segments were joined, before its tool blocks are paired."""
_Kept = tuple[CallsById, list[_Merged], list[Block]]
"""The mapping's state (`Resumes`): the calls met so far, the joined messages so far, and
the finished messages of the request for all but the last two of them."""


def _map_resumed(
    history: Sequence[Message], agent: str, reasoning: bool, resumes: Resumes[_Kept]
) -> list[Block]:
    """`map_history`, picking up where a request whose history this one continues stood
    (`Resumes`), and keeping where this one stands for the next. Its messages and blocks
    are shared with the kept state: they go on the wire and are never changed."""
    seq = listed(history)
    calls: CallsById = {}
    merged: list[_Merged] = []
    done: list[Block] = []
    start = 0
    found = resumes.find(seq, agent, reasoning)
    if found is not None:
        start, (kept_calls, kept_merged, done) = found
        calls, merged = dict(kept_calls), _open_last(kept_merged)
    kept = _merge_from(seq, start, merged, calls, agent, reasoning, keep=True)
    out = done + _paired_from(merged, len(done))
    if kept is not None:
        at, calls_then, merged_then = kept
        finished = out[: max(len(merged_then) - 2, 0)]
        resumes.keep(seq, at, (calls_then, merged_then, finished), agent, reasoning)
    return _framed(out)


def _merge_from(
    history: list[Message],
    start: int,
    merged: list[_Merged],
    calls: CallsById,
    agent: str,
    reasoning: bool,
    *,
    keep: bool,
) -> tuple[int, CallsById, list[_Merged]] | None:
    """Map `history[start:]` and join it onto `merged`, with `calls` the calls before
    `start`; with `keep`, also the state as it stood before the last assistant message
    (`Resumes`)."""
    last = last_assistant(history, start) if keep else -1
    kept = None
    wire_ids: set[str] = set()  # the asker's calls whose results may follow as `tool_result`
    for i in range(start, len(history)):
        message = history[i]
        match message.role:
            case "user":
                segment = _map_user(message)
                wire_ids = set()  # a result after it is text
            case "assistant":
                if i == last:
                    kept = (i, dict(calls), _open_last(merged))
                note_calls(calls, message)
                segment, wire_ids = _map_assistant(history, i, agent, reasoning=reasoning)
            case "tool":
                segment = _map_tool(message, agent, calls, wire_ids)
        if segment[1]:
            _join_onto(merged, segment)
    return kept


def _open_last(merged: list[_Merged]) -> list[_Merged]:
    """A copy of joined messages that joining may go on from without changing `merged`:
    only the last one is ever changed (the next segment of its role joins it)."""
    copied = merged.copy()
    if copied:
        role, blocks = copied[-1]
        copied[-1] = (role, blocks.copy())
    return copied


def _framed(messages: list[Block]) -> list[Block]:
    return frame(
        messages, role=lambda m: m["role"], user=lambda text: _message("user", [_text(text)])
    )


def _message(role: Role, blocks: list[Block]) -> Block:
    return {"role": role, "content": blocks}


def _json(value: object) -> str:
    return dumps(value)  # the model's own key order, as chat completions writes it (`_wire`)


def _text(text: str) -> Block:
    return {"type": "text", "text": text}


def _text_blocks(text: str) -> list[Block]:
    # The API rejects empty and whitespace-only text blocks.
    return [_text(text)] if text.strip() else []


def _map_user(message: Message) -> tuple[Role, list[Block]]:
    return "user", _text_blocks(message.content)


def _map_assistant(
    history: list[Message], i: int, agent: str, *, reasoning: bool
) -> tuple[tuple[Role, list[Block]], set[str]]:
    """Assistant message `i`, and the ids of its calls that go as `tool_use` blocks: the
    asker's native calls whose results follow right after it (`answered_ids`)."""
    message = history[i]
    if not owns(message.agent, agent):
        return ("user", _text_blocks(attributed_turn(message, arguments_json=_json))), set()
    thought = [dict(block) for block in message.reasoning_blocks] if reasoning else []
    native = native_calls(message)
    answered = answered_ids(history, i) if native else set()
    blocks = [_tool_use(c) if c.id in answered else _unanswered(c) for c in native]
    wire = {c.id for c in native if c.id in answered}
    return ("assistant", thought + _text_blocks(message.content) + blocks), wire


def _map_tool(
    message: Message, agent: str, calls: CallsById, wire_ids: set[str]
) -> tuple[Role, list[Block]]:
    call_id = message.tool_call_id or ""
    if call_id in wire_ids:  # right after its call (`_wire`: where a tool result may stand)
        wire_ids.discard(call_id)  # (a second result for the call is text)
        return "user", [_tool_result(call_id, message.content, is_error=message.is_error)]
    author, call = answered_call(message, calls)
    name = call.name if call is not None else None
    return "user", [_text(result_text(message, author=author, name=name, agent=agent))]


def _tool_use(call: ToolCall) -> Block:
    arguments = plain_copy(call.arguments)
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": arguments}


def _tool_result(call_id: str, content: str, *, is_error: bool) -> Block:
    block: Block = {"type": "tool_result", "tool_use_id": call_id}
    if content.strip():
        block["content"] = content
    if is_error:
        block["is_error"] = True
    return block


def _join_onto(merged: list[_Merged], segment: _Merged) -> None:
    """Join a segment onto the messages before it, so that roles alternate: onto the last
    one when it has the same role.

    A turn that starts with reasoning blocks must start its own message, so the continuation
    prompt it answered goes back between it and the assistant message before it.
    """
    role, blocks = segment
    if merged and merged[-1][0] == role == "assistant" and blocks[0]["type"] in _REASONING:
        merged.append(("user", [_text(CONTINUE_PROMPT)]))
        merged.append((role, list(blocks)))
    elif merged and merged[-1][0] == role:
        merged[-1][1].extend(blocks)
    else:
        merged.append((role, list(blocks)))


def _paired_from(merged: list[_Merged], start: int) -> list[Block]:
    """The messages `merged[start:]` as the request sends them, each with only the
    `tool_use` / `tool_result` blocks that answer each other (the rest become text).

    The API requires every `tool_use` to be answered by a `tool_result` in the next message,
    every `tool_result` to answer a `tool_use` of the previous message, and the results to
    come before any other content of their message. So a message's blocks depend on its
    neighbours only: those before `start` are not read again, and `merged` is not changed.
    """
    blocks_of = [blocks.copy() for _, blocks in merged[start:]]
    for k, blocks in enumerate(blocks_of):
        index = start + k
        if merged[index][0] == "user":
            previous = merged[index - 1][1] if index > 0 else []
            asked = _ids(previous, "tool_use", "id")
            _unpaired_to_text(blocks, "tool_result", "tool_use_id", asked, _orphan_result)
            blocks.sort(key=lambda block: block["type"] != "tool_result")  # stable: results first
    for k, blocks in enumerate(blocks_of):
        if merged[start + k][0] == "assistant":
            following = blocks_of[k + 1] if k + 1 < len(blocks_of) else []
            answered = _ids(following, "tool_result", "tool_use_id")
            _unpaired_to_text(blocks, "tool_use", "id", answered, _unanswered_use)
    return [_message(merged[start + k][0], blocks) for k, blocks in enumerate(blocks_of)]


def _ids(blocks: list[Block], kind: str, key: str) -> set[str]:
    return {block[key] for block in blocks if block["type"] == kind}


def _unpaired_to_text(
    blocks: list[Block], kind: str, key: str, partners: set[str], to_text: Callable[[Block], Block]
) -> None:
    """Blocks of `kind` whose `key` is not among `partners` become text, in place."""
    blocks[:] = [
        to_text(block) if block["type"] == kind and block[key] not in partners else block
        for block in blocks
    ]


def _orphan_result(block: Block) -> Block:
    ended = "failed" if block.get("is_error") else "returned"
    return _text(f"Call `{block['tool_use_id']}` {ended}:\n{block.get('content', '')}")


def _unanswered_use(block: Block) -> Block:
    return _text(f"(called `{block['name']}` with {_json(block['input'])}; no result)")


def _unanswered(call: ToolCall) -> Block:
    """One of the asker's calls whose result does not follow it: text, as `_unanswered_use`."""
    return _text(f"(called `{call.name}` with {_json(call.arguments)}; no result)")
