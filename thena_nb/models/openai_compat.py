"""`OpenAICompatModel`: any server that speaks OpenAI chat completions (Ollama, vLLM, LM Studio,
llama.cpp), through the official `openai` SDK.

How the workflow's history goes on the wire:

- `request.system` is the system message (in `tools_mode="prompt"` the tool section follows it).
- The asking agent's own assistant messages keep their text; their native calls become
  `tool_calls` with their ids and JSON-string `arguments` (keys in the model's own order),
  answered by `tool` messages, when their results stand right after them in the history
  (`_wire`: where a tool result may stand); any other of its calls is written as
  `<tool_call>` text, and its result goes back as user text where it stands.
- Calls rescued from text are not sent as `tool_calls` (their ids were never the server's): the
  assistant text already holds them, and each result goes back as user text
  (``Your call to `get_weather` returned:`` and the result).
- Messages of other agents are user text attributed to them (`[SecurityAgent] …`), as
  `AnthropicModel` shows them.
- Consecutive user texts are joined with a blank line, because many chat templates require
  alternating roles; a history that does not start with a user message gets `START_PROMPT`
  first, and one that ends with the agent's own answer gets `CONTINUE_PROMPT` last.

The rules it shares with `AnthropicModel` are written once in `_wire`.

The model's reasoning (a `reasoning_content` or `reasoning` field of the message or of the
streamed deltas, as DeepSeek, vLLM, Ollama and LM Studio send it, and a leading
`<think>…</think>` block in the content) becomes `Reply.reasoning`, never its text, and is
not sent back.

`OpenAICompatModel.render` is the one place a request becomes the body of a chat completions
request (the keyword arguments of `chat.completions.create`); `respond` posts exactly what it
returns, through the SDK's client, and reads the answer's JSON as it came.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal, TypedDict, assert_never
from urllib.parse import urlsplit, urlunsplit

from pydantic import ValidationError

from thena_nb.core.engine._reply_check import refused_reply
from thena_nb.core.records._secrets import redact_url
from thena_nb.core.records.errors import ModelError, TransientModelError
from thena_nb.core.records.model import ModelRequest, Reply, ToolSpec
from thena_nb.core.records.types import Message, ToolCall
from thena_nb.models._pools import LoopClients, ssl_context
from thena_nb.models._retry import status_error
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

try:
    import openai
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "`OpenAICompatModel` needs the `openai` package: `pip install thena_nb[openai]`"
    ) from _exc

__all__ = [
    "CONTINUE_PROMPT",
    "INVALID_ARGUMENTS_KEY",
    "START_PROMPT",
    "OpenAICompatModel",
    "ToolsMode",
    "map_history",
    "parse_arguments",
    "split_leading_think",
]

ToolsMode = Literal["auto", "prompt", "none"]
"""How tools reach the model: the API's `tools` field, the system prompt, or not at all."""

INVALID_ARGUMENTS_KEY = "_raw_arguments"
"""Key under which a native call keeps `arguments` that were not a JSON object.

No tool can have a parameter of this name (argument models forbid extra keys and pydantic
fields cannot start with `_`), so such a call always fails validation, and its error
observation shows the raw text back to the model.
"""

_PLACEHOLDER_KEY = "not-needed"

_PROMPT_TOOLS_HEADER = """\
# Tools

You can call the functions described below. Their signatures are inside <tools></tools> tags:
<tools>
{specs}
</tools>

To call a function, write a JSON object with its name and arguments inside \
<tool_call></tool_call> tags, one block per call:
<tool_call>
{{"name": "<function name>", "arguments": {{<arguments as a JSON object>}}}}
</tool_call>

Each result comes back as a user message that starts with "Your call to `<function name>` \
returned:" ("failed:" when the call failed)."""


class OpenAICompatModel:
    """A chat model behind an OpenAI-compatible chat completions endpoint.

    Retries belong to the executor (S25): the SDK's own retries are off, and rate limits
    (429), server errors (5xx), timeouts and dropped connections raise `TransientModelError`
    with the server's `retry-after` when it sent one. Any other API error raises a final
    `ModelError` naming the agent, the HTTP status and the server's message, with the SDK's
    exception as `__cause__`. The API key never appears in a repr, a record or an error.

    Tool modes:

    - `"auto"` sends the tools in the API's `tools` field; native calls come back as
      `ToolCall`s with `source="native"`, and the executor still rescues calls the model
      wrote as text.
    - `"prompt"`, for models or servers without tool support, sends no `tools` field and
      describes the tools in the system prompt in the Hermes format: the signatures as JSON
      inside `<tools></tools>`, and each call written as
      `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`; each result comes back as
      user text. Every call then reaches the workflow through rescue. Earlier native calls in
      the history are shown in the same markup, so nothing tool-shaped goes on the wire.
    - `"none"` sends no tools at all; earlier calls are shown as in `"prompt"`.

    A native call whose `arguments` are not a JSON object (the server passes on whatever the
    model wrote) is kept, with the raw text as `{INVALID_ARGUMENTS_KEY: raw}`: it fails
    argument validation like any invalid call, so the model sees its own text in the error
    observation and can try again. Arguments encoded twice (a JSON string holding a JSON
    object) are decoded once more.

    Args:
        model: The model id the server knows, e.g. `"qwen2.5:7b"`; also the model's `name`.
        base_url: The API root, e.g. `"http://localhost:11434/v1"` for Ollama.
        api_key: The key; `OPENAI_API_KEY` when not given, else a placeholder (local servers
            need none).
        client: A configured `openai.AsyncOpenAI` to use instead of building one. It is
            used as it is (its timeout applies, its retries are turned off), so keep it to
            one event loop; a client the model builds itself keeps a connection pool for the
            event loop it runs on, reused from call to call and run to run, and works across
            `wf.run()` calls.
        timeout: Seconds before a request counts as timed out.
        stream: Stream the reply (SSE) and pass each text piece to `request.on_text_delta`.
        tools_mode: `"auto"`, `"prompt"` or `"none"`, as above.

    Example:
        >>> model = OpenAICompatModel("qwen2.5:7b", base_url="http://localhost:11434/v1")
        >>> model
        OpenAICompatModel('qwen2.5:7b', base_url='http://localhost:11434/v1')
    """

    provider: str | None = None
    """Who bills the calls, as a genai-prices provider id, for `Turn.cost_usd`; `None`: the
    one whose API `base_url` is (api.openai.com is OpenAI's; a local server is no one's)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        timeout: float = 60.0,
        stream: bool = False,
        tools_mode: ToolsMode = "auto",
    ) -> None:
        if tools_mode not in ("auto", "prompt", "none"):
            raise ValueError(f"`tools_mode` must be 'auto', 'prompt' or 'none', got {tools_mode!r}")
        if client is None:
            if base_url is None:
                raise ValueError(
                    f"OpenAICompatModel({model!r}) needs `base_url=` (e.g. "
                    "'http://localhost:11434/v1' for Ollama) or a configured `client=`"
                )
            key = api_key or os.environ.get("OPENAI_API_KEY") or _PLACEHOLDER_KEY
            client = openai.AsyncOpenAI(
                base_url=base_url,
                api_key=key,
                timeout=timeout,
                max_retries=0,
                http_client=_pool(),  # (calls use one per event loop: its settings only)
            )
            self._own_client = True
        else:
            client = client.with_options(max_retries=0)
            self._own_client = False
            if base_url is None:
                base_url = str(client.base_url)
        self.name = model
        self.model = model
        self.base_url = base_url
        self.timeout = timeout
        self.stream = stream
        self.tools_mode: ToolsMode = tools_mode
        self._client = client
        self._clients: LoopClients[openai.AsyncOpenAI] = LoopClients()
        self._resumes: Resumes[_Mapped] = Resumes()
        scrub_sdk_logs(self._secrets())  # the SDK's own DEBUG logging

    def __repr__(self) -> str:
        parts = [repr(self.model), f"base_url={redact_url(self.base_url or '')!r}"]
        if self.stream:
            parts.append("stream=True")
        if self.tools_mode != "auto":
            parts.append(f"tools_mode={self.tools_mode!r}")
        return f"OpenAICompatModel({', '.join(parts)})"

    async def respond(self, request: ModelRequest) -> Reply:
        """Send one chat completions request and map the answer to a `Reply`.

        Raises:
            TransientModelError: On 429, 5xx, a timeout or a dropped connection.
            ModelError: On any other API error.
        """
        params = self._params(request, resumed=True)
        with self._map_errors(request.agent):
            client = self._client_for_running_loop()
            if self.stream:
                return await self._respond_streamed(client, params, request)
            answer = await client.post(_PATH, body=params, cast_to=object, options=_OPTIONS)
            return self._reply(answer, request.agent)

    def request_params(self, request: ModelRequest) -> dict[str, Any]:
        """The same as `render`."""
        return self.render(request)

    def render(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of `chat.completions.create` that `respond` sends.

        Pure: no I/O, nothing changed. In `tools_mode="prompt"` the tool section is in the
        system message. The API key belongs to the client and is never in it.

        Example:
            >>> from thena_nb.core.records.model import ModelRequest
            >>> from thena_nb.core.records.types import Message
            >>> model = OpenAICompatModel("qwen3:8b", base_url="http://localhost:11434/v1")
            >>> request = ModelRequest(agent="A", messages=[Message(role="user", content="Hi")])
            >>> model.render(request)["messages"]
            [{'role': 'user', 'content': 'Hi'}]
        """
        return self._params(request, resumed=False)

    def _params(self, request: ModelRequest, *, resumed: bool) -> dict[str, Any]:
        """`render`; `resumed`: map only the messages new since an earlier request of the
        run (what `respond` sends: the same body, its messages shared with the kept state)."""
        native = self.tools_mode == "auto"
        system = request.system
        if self.tools_mode == "prompt" and request.tools:
            system = (
                f"{system}\n\n{_prompt_tools(request.tools)}"
                if system
                else _prompt_tools(request.tools)
            )
        messages: list[dict[str, Any]] = []
        if system:
            messages.append({"role": "system", "content": system})
        if resumed:
            mapped = _map_resumed(request.messages, request.agent, native, self._resumes)
        else:
            mapped = map_history(request.messages, agent=request.agent, native_tools=native)
        messages.extend(mapped)
        params: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": request.max_tokens,
        }
        if native and request.tools:
            params["tools"] = [_tool_param(spec) for spec in request.tools]
        if self.stream:
            params["stream"] = True
            params["stream_options"] = {"include_usage": True}
        return params

    def _client_for_running_loop(self) -> openai.AsyncOpenAI:
        """The SDK client for a call on the running event loop.

        HTTP connections belong to the event loop that opened them, so a client this model
        built gets a connection pool of its own per loop (`LoopClients`): the turns of a
        run, and the runs of `wf.run()` in a script (each reuses its thread's loop), share
        their connections. A `client=` the user passed is used as it is.
        """
        if not self._own_client:
            return self._client
        return self._clients.for_running_loop(self._new_client)

    def _new_client(self) -> openai.AsyncOpenAI:
        return self._client.with_options(http_client=_pool())

    def __getstate__(self) -> dict[str, Any]:
        """What a copy (pickle, a Ray worker) needs: the SDK client this model built holds
        locks and connections, so it travels as its settings and is built again."""
        state = dict(self.__dict__)
        del state["_clients"]  # each copy opens its own connections
        del state["_resumes"]  # (a cache of this process's requests)
        if self._own_client:
            client = state.pop("_client")
            state["_client_settings"] = {"api_key": client.api_key, "timeout": client.timeout}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        settings = state.pop("_client_settings", None)
        self.__dict__.update(state)
        self._clients = LoopClients()
        self._resumes = Resumes()
        if settings is not None:
            self._client = openai.AsyncOpenAI(
                base_url=self.base_url, max_retries=0, http_client=_pool(), **settings
            )
        scrub_sdk_logs(self._secrets())  # (a copy in another process: its loggers too)

    async def _respond_streamed(
        self, client: openai.AsyncOpenAI, params: dict[str, Any], request: ModelRequest
    ) -> Reply:
        stream = await client.post(
            _PATH,
            body=params,
            cast_to=object,
            options=_OPTIONS,
            stream=True,
            stream_cls=openai.AsyncStream[object],
        )
        builder = _StreamedReply()
        async with stream:
            async for chunk in stream:
                try:
                    piece = builder.add(chunk)
                except (AttributeError, LookupError, TypeError, ValueError) as exc:
                    raise self._malformed(exc, request.agent, "chunk") from exc
                if piece and request.on_text_delta is not None:
                    request.on_text_delta(piece)
        if not builder.choices:
            raise ModelError(
                f"{self._describe(request.agent)}: the stream ended without an answer",
                model_name=self.name,
            )
        try:
            return builder.reply()
        except (AttributeError, LookupError, TypeError, ValueError) as exc:
            raise self._malformed(exc, request.agent, "chunk") from exc

    def _reply(self, answer: object, agent: str) -> Reply:
        """The `Reply` in a chat completion, as the JSON the server sent (`respond` asks the
        SDK for the body as it is, without building its `ChatCompletion` record)."""
        if isinstance(answer, str):  # JSON sent under another content type: read it all the same
            answer = json.loads(answer)  # (not JSON: `_map_errors` says so)
        try:
            completion = _object(answer)
            if not completion.get("choices"):
                raise ModelError(
                    f"{self._describe(agent)}: the server returned no choices",
                    model_name=self.name,
                )
            return _reply_from_completion(completion)
        except (AttributeError, LookupError, TypeError, ValueError) as exc:  # no completion
            raise self._malformed(exc, agent, "completion") from exc

    def _malformed(self, exc: Exception, agent: str, what: str) -> ModelError:
        """The error for an answer that is not the chat completion (or chunk) it should be."""
        if isinstance(exc, ValidationError):
            refused = refused_reply(exc, model=self.name, agent=agent)
            if refused is not None:  # e.g. a negative token count
                return scrubbed(refused, exc, secrets=self._secrets())
        error = ModelError(
            f"{self._describe(agent)}: the server's answer is not a chat {what} "
            f"({type(exc).__name__}: {exc}). Check that `base_url` points at an endpoint that "
            "speaks the OpenAI chat completions API.",
            model_name=self.name,
        )
        return scrubbed(error, exc, secrets=self._secrets())

    def _describe(self, agent: str) -> str:
        return f"agent {agent!r}: model {self.model!r}"

    @contextmanager
    def _map_errors(self, agent: str) -> Iterator[None]:
        """Turn SDK exceptions into `ModelError`s at one boundary."""
        try:
            yield
        except openai.OpenAIError as exc:
            error = self._model_error(exc, self._describe(agent))
            raise scrubbed(error, exc, secrets=self._secrets()) from exc
        except json.JSONDecodeError as exc:
            error = ModelError(
                f"{self._describe(agent)}: the server's answer is not JSON ({exc.msg}, at "
                f"character {exc.pos}). Check that `base_url` points at an endpoint that speaks "
                "the OpenAI chat completions API.",
                model_name=self.name,
            )
            raise scrubbed(error, exc, secrets=self._secrets()) from exc

    def _model_error(self, exc: openai.OpenAIError, where: str) -> ModelError:
        if isinstance(exc, openai.APITimeoutError):
            return TransientModelError(
                f"{where}: request timed out (timeout={self.timeout}s)", model_name=self.name
            )
        if isinstance(exc, openai.APIConnectionError):
            return TransientModelError(
                f"{where}: could not reach {_safe_url(self.base_url)} ({exc.message}); is the "
                "server running?",
                model_name=self.name,
            )
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            text = f"{where}: HTTP {status}: {_server_message(exc)}"
            return status_error(
                text, status=status, model_name=self.name, headers=exc.response.headers
            )
        if isinstance(exc, openai.APIError):
            # An error event inside a stream: no HTTP status, maybe a code in the body.
            code = exc.body.get("code") if isinstance(exc.body, Mapping) else None
            stream_status = code if isinstance(code, int) else None
            text = f"{where}: error in the stream: {_server_message(exc)}"
            return status_error(text, status=stream_status, model_name=self.name)
        return ModelError(f"{where}: {type(exc).__name__}: {exc}", model_name=self.name)

    def _secrets(self) -> list[str | None]:
        """The key this model's requests carry, to scrub from anything it raises (with
        every other secret `core/records/_secrets.py` `scrub` knows)."""
        key = self._client.api_key
        return [key] if isinstance(key, str) and key != _PLACEHOLDER_KEY else []


_PATH = "/chat/completions"
_OPTIONS: Any = {"security": {"bearer_auth": True}}
"""How `respond` posts a request: to the path, with the auth, that `chat.completions.create`
uses. `client.post(..., cast_to=object)` hands back the answer's JSON as it came, and with
`stream_cls=AsyncStream[object]` each streamed chunk's: `create` would build the SDK's record
of the answer (about a fifth of a call's CPU), or of every chunk (most of a streamed call's),
for objects `respond` reads once, and walk the arguments against their type hints."""


def _pool() -> openai.DefaultAsyncHttpxClient:
    """A connection pool with the SDK's defaults and the process's TLS settings, made
    without loading the CA bundle again (`_pools.ssl_context`)."""
    return openai.DefaultAsyncHttpxClient(verify=ssl_context())


# --- history -> chat completions messages --------------------------------------------------


def map_history(
    messages: Sequence[Message], *, agent: str, native_tools: bool = True
) -> list[dict[str, Any]]:
    """Map the workflow's history to chat completions messages for `agent`.

    Args:
        messages: The history, as the request carries it.
        agent: The asking agent; assistant messages of other agents become attributed user text.
        native_tools: Send native calls as `tool_calls` answered by `tool` messages; `False`
            writes them as `<tool_call>` text and their results as user text.

    Returns:
        Messages that start with `user`, end with `user`, and answer every `tool_calls` id
        with a `tool` message right after it.
    """
    out, _ = _map_from(listed(messages), 0, [], {}, agent, native_tools, keep=False)
    return _framed(out)


_Mapped = tuple[list[dict[str, Any]], CallsById]
"""The mapping loop's state: the messages mapped so far and the calls met so far."""


def _map_resumed(
    messages: Sequence[Message], agent: str, native_tools: bool, resumes: Resumes[_Mapped]
) -> list[dict[str, Any]]:
    """`map_history`, picking up where a request whose history this one continues stood
    (`Resumes`), and keeping where this one stands for the next. Its messages are shared
    with the kept state: they go on the wire and are never changed."""
    seq = listed(messages)
    found = resumes.find(seq, agent, native_tools)
    if found is None:
        start, out, calls = 0, [], {}
    else:
        start, (kept, kept_calls) = found
        out, calls = _unshared(kept), dict(kept_calls)
    out, state = _map_from(seq, start, out, calls, agent, native_tools, keep=True)
    if state is not None:
        resumes.keep(seq, state[0], state[1], agent, native_tools)
    return _framed(out)


def _map_from(
    messages: list[Message],
    start: int,
    out: list[dict[str, Any]],
    calls: CallsById,
    agent: str,
    native_tools: bool,
    *,
    keep: bool,
) -> tuple[list[dict[str, Any]], tuple[int, _Mapped] | None]:
    """Map `messages[start:]` onto `out`, with `calls` the calls before `start`; with
    `keep`, also the state as it stood before the last assistant message (`Resumes`)."""
    last = last_assistant(messages, start) if keep else -1
    state: tuple[int, _Mapped] | None = None
    wire_ids: set[str] = set()
    for i in range(start, len(messages)):
        message = messages[i]
        match message.role:
            case "user":
                _add_user(out, message.content)
                wire_ids = set()  # a result after it is text
            case "assistant":
                if i == last:
                    state = (i, (_unshared(out), dict(calls)))
                note_calls(calls, message)
                wire_ids = _map_assistant(out, messages, i, agent, native_tools=native_tools)
            case "tool":
                _map_tool(out, message, agent, calls, wire_ids)
            case _:
                assert_never(message.role)
    return out, state


def _unshared(out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of mapped messages that the mapping may go on from without changing `out`:
    only a user message at the end is ever changed (the next user text joins it)."""
    copied = out.copy()
    if copied and copied[-1]["role"] == "user":
        copied[-1] = dict(copied[-1])
    return copied


def _framed(out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return frame(out, role=lambda m: m["role"], user=lambda text: {"role": "user", "content": text})


def _map_assistant(
    out: list[dict[str, Any]],
    messages: Sequence[Message],
    i: int,
    agent: str,
    *,
    native_tools: bool,
) -> set[str]:
    """Append assistant message `i`; return the call ids it put in `tool_calls`."""
    message = messages[i]
    if not owns(message.agent, agent):
        _add_user(out, attributed_turn(message))
        return set()
    native = native_calls(message)
    answered = answered_ids(messages, i) if native_tools else set()
    wire = [c for c in native if c.id in answered]
    # Rescued calls are in the text already; native calls that cannot go on the wire are
    # written the way `tools_mode="prompt"` asks the model to write them.
    content = _join(message.content, *(_call_text(c) for c in native if c not in wire))
    if not content.strip() and not wire:
        return set()
    wire_message: dict[str, Any] = {"role": "assistant", "content": content}
    if wire:
        # The API wants `content` null rather than empty next to `tool_calls`.
        wire_message["content"] = content or None
        wire_message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": dumps(c.arguments)},
            }
            for c in wire
        ]
    out.append(wire_message)
    return {c.id for c in wire}


def _map_tool(
    out: list[dict[str, Any]],
    message: Message,
    agent: str,
    calls: CallsById,
    wire_ids: set[str],
) -> None:
    call_id = message.tool_call_id or ""
    if call_id in wire_ids:  # right after its call (`_wire`: where a tool result may stand)
        wire_ids.discard(call_id)  # (a second result for the call is text)
        out.append({"role": "tool", "tool_call_id": call_id, "content": message.content})
        return
    author, call = answered_call(message, calls)
    name = call.name if call is not None else None
    _add_user(out, result_text(message, author=author, name=name, agent=agent))


def _add_user(out: list[dict[str, Any]], text: str) -> None:
    """Append user text, joined to a user message just before it: many chat templates
    require alternating roles."""
    if not text.strip():
        return
    if out and out[-1]["role"] == "user":
        out[-1]["content"] = _join(out[-1]["content"], text)
    else:
        out.append({"role": "user", "content": text})


def _call_text(call: ToolCall) -> str:
    return f"<tool_call>\n{dumps({'name': call.name, 'arguments': call.arguments})}\n</tool_call>"


def _join(*parts: str) -> str:
    return "\n\n".join(p for p in parts if p)


# --- tools -------------------------------------------------------------------------------


def _tool_param(spec: ToolSpec) -> dict[str, Any]:
    function: dict[str, Any] = {"name": spec.name}
    if spec.description:
        function["description"] = spec.description
    function["parameters"] = plain_copy(spec.parameters)
    return {"type": "function", "function": function}


def _prompt_tools(tools: Sequence[ToolSpec]) -> str:
    """The tool section of the system prompt in `tools_mode="prompt"` (Hermes format)."""
    specs = "\n".join(dumps(_tool_param(spec)) for spec in tools)
    return _PROMPT_TOOLS_HEADER.format(specs=specs)


# --- chat completions answer -> Reply ------------------------------------------------------


def _reply_from_completion(completion: dict[str, Any]) -> Reply:
    """The `Reply` in a chat completion's JSON body; raises `LookupError`, `TypeError` or
    `ValueError` (`Reply`'s own checks) when the body is not one."""
    choice = completion["choices"][0]
    message = choice["message"]
    calls = []
    for tc in message.get("tool_calls") or ():
        if tc.get("type", "function") == "function":  # (some servers leave `type` out)
            function = tc["function"]
            calls.append(_tool_call(tc.get("id"), function.get("name"), function.get("arguments")))
    thought, text = split_leading_think(message.get("content") or "")
    return Reply(
        text=text,
        tool_calls=calls,
        finish_reason=choice.get("finish_reason"),
        reasoning=_joined(_reasoning_field(message), thought),
        response_model=_text_or_none(completion.get("model")),
        response_id=_text_or_none(completion.get("id")),
        **_usage(completion.get("usage")),
    )


def _text_or_none(value: Any) -> str | None:
    """A field the answer may give as a string (servers differ: some leave it out)."""
    return value if isinstance(value, str) and value else None


def _object(answer: Any) -> dict[str, Any]:
    """`answer` (a completion's or a chunk's JSON), when it is an object: `TypeError` else."""
    if not isinstance(answer, dict):
        raise TypeError(f"a JSON {type(answer).__name__}, not an object")
    return answer


def _field(part: Any, name: str) -> Any:
    """A field of part of an answer's JSON, `None` when it has none (or is no object)."""
    return read(part, name, None)


# --- reasoning ---------------------------------------------------------------------------


_THINK_OPEN = re.compile(r"\A\s*<(think|thinking)>")
_THINK_TAGS = ("<think>", "<thinking>")


def split_leading_think(content: str) -> tuple[str | None, str]:
    """Split a leading `<think>…</think>` block off a reply's content.

    A block left open holds the whole reply (it was cut off while thinking); a closing
    `</think>` with no opening tag before it means the chat template opened the block in
    the prompt, so the content starts inside it.

    Returns:
        The reasoning (`None` when there is none or it is blank) and the content without it
        (`content` itself when there was no block).

    Example:
        >>> split_leading_think("<think>They want Lisbon.</think> Sunny in Lisbon.")
        ('They want Lisbon.', 'Sunny in Lisbon.')
        >>> split_leading_think("Plain answer.")
        (None, 'Plain answer.')
    """
    opened = _THINK_OPEN.match(content)
    if opened is not None:
        closing = f"</{opened.group(1)}>"
        end = content.find(closing, opened.end())
        if end < 0:
            return content[opened.end() :].strip() or None, ""
        return content[opened.end() : end].strip() or None, content[end + len(closing) :].lstrip()
    end = content.find("</think>")
    if end >= 0 and "<think>" not in content[:end]:
        return content[:end].strip() or None, content[end + len("</think>") :].lstrip()
    return None, content


def _reasoning_field(message: Any) -> str | None:
    """The reasoning a server sent beside the content: `reasoning_content` (DeepSeek,
    vLLM, LM Studio) or `reasoning` (Ollama, OpenRouter, newer vLLM)."""
    for name in ("reasoning_content", "reasoning"):
        value = _field(message, name)
        if isinstance(value, str) and value:
            return value
    return None


def _joined(*parts: str | None) -> str | None:
    text = "\n\n".join(part.strip() for part in parts if part and part.strip())
    return text or None


class _ThinkFilter:
    """Holds streamed text back while it may open, or is inside, a leading think block, so
    that `on_text_delta` never shows reasoning written in the content."""

    def __init__(self) -> None:
        self.seen = ""
        self.closing: str | None = None
        self.done = False

    def feed(self, piece: str) -> str:
        """The part of `piece` to show as answer text ("" while held back)."""
        if self.done:
            return piece
        self.seen += piece
        if self.closing is None:
            head = self.seen.lstrip()
            if not head or any(tag.startswith(head) for tag in _THINK_TAGS):
                return ""  # still could be the opening tag
            opened = _THINK_OPEN.match(self.seen)
            if opened is None:
                self.done = True
                return self.seen
            self.closing = f"</{opened.group(1)}>"
        end = self.seen.find(self.closing)
        if end < 0:
            return ""
        self.done = True
        return self.seen[end + len(self.closing) :].lstrip()


def _tool_call(call_id: str | None, name: str | None, raw: str | None) -> ToolCall:
    # Some servers leave the id out; the executor still needs one per call, and one no other
    # call of the run has: `call_<24 random hex digits>`, as the API's own ids look (a
    # `call_<n>` would be the same in every reply).
    return ToolCall(
        id=call_id or f"call_{os.urandom(12).hex()}",
        name=name or "",
        arguments=parse_arguments(raw),
        source="native",
    )


def parse_arguments(raw: str | None) -> dict[str, Any]:
    """Decode a native call's `arguments` string; never raises.

    Returns the JSON object, `{}` for an empty string, the object inside a JSON string that
    holds one (double encoding), and otherwise `{INVALID_ARGUMENTS_KEY: raw}`.
    """
    if raw is None or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
        if isinstance(value, str):
            value = json.loads(value)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return value
    return {INVALID_ARGUMENTS_KEY: raw}


class _Usage(TypedDict, total=False):
    """The token counts of a `Reply`, as keyword arguments."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    reasoning_tokens: int


def _usage(usage: Any) -> _Usage:
    """The token counts in an answer's `usage` (a completion's, or a stream's last chunk's)."""
    if usage is None:
        return {}
    details = _field(usage, "prompt_tokens_details")
    completion = _field(usage, "completion_tokens_details")
    return {
        "input_tokens": _field(usage, "prompt_tokens") or 0,
        "output_tokens": _field(usage, "completion_tokens") or 0,
        "cache_read_tokens": _field(details, "cached_tokens") or 0,
        "cache_write_tokens": _field(details, "cache_write_tokens") or 0,
        "reasoning_tokens": _field(completion, "reasoning_tokens") or 0,
    }


class _StreamedReply:
    """Assembles streamed chunks into the `Reply` the same answer gives unstreamed."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.shown = _ThinkFilter()
        self.calls: dict[int, dict[str, str]] = {}
        self.finish_reason: str | None = None
        self.usage: Any = None
        self.choices = 0
        self.model: str | None = None
        self.id: str | None = None

    def add(self, chunk: Any) -> str:
        """Take one chunk in (its JSON object, as the server sent it); return its text piece
        ("" when it has none)."""
        usage = _object(chunk).get("usage")
        if usage is not None:
            self.usage = usage
        if self.model is None:
            self.model = _text_or_none(chunk.get("model"))
            self.id = _text_or_none(chunk.get("id"))
        choices = chunk.get("choices")  # (a chunk with usage alone may have none)
        if not choices:
            return ""
        self.choices += 1
        choice = choices[0]
        finish_reason = _field(choice, "finish_reason")
        if finish_reason is not None:
            self.finish_reason = finish_reason
        delta = read(choice, "delta")
        for n, tc in enumerate(_field(delta, "tool_calls") or ()):
            index = _field(tc, "index")
            call = self.calls.setdefault(
                index if isinstance(index, int) else n, {"id": "", "name": "", "arguments": ""}
            )
            # Tool call deltas are assembled by index: the id arrives once, name and
            # arguments in pieces.
            call_id = _field(tc, "id")
            if call_id and not call["id"]:
                call["id"] = call_id
            function = _field(tc, "function")
            if function is not None:
                call["name"] += _field(function, "name") or ""
                call["arguments"] += _field(function, "arguments") or ""
        thought = _reasoning_field(delta)
        if thought:
            self.reasoning.append(thought)
        piece = _field(delta, "content") or ""
        if not piece:
            return ""
        self.text.append(piece)
        return self.shown.feed(piece)

    def reply(self) -> Reply:
        """The assembled `Reply`."""
        calls = [
            _tool_call(c["id"], c["name"], c["arguments"])
            for c in (self.calls[i] for i in sorted(self.calls))
        ]
        thought, text = split_leading_think("".join(self.text))
        return Reply(
            text=text,
            tool_calls=calls,
            finish_reason=self.finish_reason,
            reasoning=_joined("".join(self.reasoning), thought),
            response_model=self.model,
            response_id=self.id,
            **_usage(self.usage),
        )


# --- errors --------------------------------------------------------------------------------


def _server_message(exc: openai.APIError) -> str:
    """What the server said, from the error body (OpenAI's `{"error": {"message"}}`, Ollama's
    `{"error": "..."}` or plain text)."""
    body = exc.body
    if isinstance(body, Mapping):
        message = body.get("message") or body.get("error")
        if isinstance(message, str) and message:
            return message
    if isinstance(body, str) and body.strip():
        return body.strip()
    return exc.message


def _safe_url(url: str | None) -> str:
    """`url` without user info, query or fragment, fit for messages and reprs."""
    if not url:
        return ""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
