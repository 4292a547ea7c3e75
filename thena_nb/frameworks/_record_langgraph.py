"""`record` for a compiled LangGraph graph: LangChain callbacks that every call inherits.

LangChain's `register_configure_hook` adds the handler held by a context variable to every
callback manager configured while it is set; the block sets it, so the caller's own
`graph.invoke(...)` (or `ainvoke`, `stream`, tasks started inside the block) reports to it,
and resets it on exit. A run is a root chain run named as the graph; each chat-model call
under it is a turn. The tool calls' results come from the tools' own events (`on_tool_end`,
with the call id) and, for calls whose tool raised, from the `ToolMessage`s of the next
model request.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tracers.context import register_configure_hook
from langgraph.pregel import Pregel

from thena_nb.core.engine.foreign import _Live
from thena_nb.core.records._text import to_text
from thena_nb.core.records.model import Reply, ToolSpec
from thena_nb.core.records.types import ToolCall
from thena_nb.core.runs.run import jsonable
from thena_nb.frameworks._record_base import Seen, Taken, clock

__all__ = ["LangGraphHook", "is_graph"]


def is_graph(obj: Any) -> bool:
    """Whether `obj` is a compiled LangGraph graph."""
    return isinstance(obj, Pregel)


_ACTIVE: ContextVar[_Handler | None] = ContextVar("thena_nb_record_langgraph", default=None)
register_configure_hook(_ACTIVE, True)


class LangGraphHook:
    """Records every run of a compiled graph inside the block (see the module)."""

    framework = "LangGraph"

    def __init__(self, graph: Any, name: str | None) -> None:
        self.graph = graph
        self.name: str = name or graph.get_name() or "LangGraph"
        self.model = _Live("", False)
        self._runs: dict[UUID, Taken] = {}
        self._roots: dict[UUID, UUID] = {}
        self._calls: dict[UUID, Seen] = {}
        self._tools: dict[UUID, str] = {}
        self._lock = threading.Lock()
        self._token: Token[_Handler | None] | None = None

    def start(self) -> None:
        outer = _ACTIVE.get()
        hooks = [*(outer.hooks if outer is not None else ()), self]
        self._token = _ACTIVE.set(_Handler(hooks))

    def stop(self, error: BaseException | None) -> None:
        token, self._token = self._token, None
        if token is not None:
            try:
                _ACTIVE.reset(token)
            except ValueError:  # left in another context than it was entered in
                _ACTIVE.set(token.old_value if token.old_value is not Token.MISSING else None)
        for taken in self._runs.values():
            if not taken.ended and error is not None:
                taken.error = taken.error or error

    def taken(self) -> list[Taken]:
        return list(self._runs.values())

    # -- events (under the lock: sync handlers may run on LangChain's worker threads) ----

    def chain_start(self, run_id: UUID, parent: UUID | None, name: str | None) -> None:
        with self._lock:
            if parent is None:
                if name == self.graph.get_name():
                    self._runs[run_id] = Taken()
                    self._roots[run_id] = run_id
            elif parent in self._roots:
                self._roots[run_id] = self._roots[parent]

    def chain_end(self, run_id: UUID, outputs: Any, error: BaseException | None) -> None:
        with self._lock:
            taken = self._runs.get(run_id)
            if taken is None:
                return
            taken.ended, taken.finished_at = True, datetime.now(UTC)
            if error is not None:
                taken.error = error
            else:
                taken.output = _output(outputs)

    def model_start(
        self, run_id: UUID, parent: UUID | None, messages: Sequence[BaseMessage], params: Any
    ) -> None:
        with self._lock:
            root = self._roots.get(parent) if parent is not None else None
            if root is None:
                return
            self._roots[run_id] = root
            taken = self._runs[root]
            if not taken.seen:
                taken.input = _input(messages)
            for m in messages:  # what the model reads of its calls, raised ones included
                if isinstance(m, ToolMessage):
                    taken.result(m.tool_call_id, m.status != "error", _text(m.content))
            started_at, t0 = clock()
            seen = Seen(
                system="\n\n".join(
                    _text(m.content) for m in messages if isinstance(m, SystemMessage)
                ),
                tools=_specs(params.get("tools") or ()),
                canonical=_canonical(messages, params),
                model=_model_name(params),
                max_tokens=int(params.get("max_tokens") or 0),
                started_at=started_at,
                t0=t0,
            )
            taken.seen.append(seen)
            self._calls[run_id] = seen

    def model_end(self, run_id: UUID, response: Any, error: BaseException | None) -> None:
        with self._lock:
            seen = self._calls.pop(run_id, None)
            if seen is None:
                return
            if error is not None:
                seen.failed(error)
                return
            generation = response.generations[0][0]
            seen.answered(_reply(getattr(generation, "message", None), generation.text))

    def tool_start(self, run_id: UUID, parent: UUID | None, call_id: str | None) -> None:
        with self._lock:
            if parent is not None and parent in self._roots and call_id:
                self._roots[run_id] = self._roots[parent]
                self._tools[run_id] = call_id

    def tool_end(self, run_id: UUID, output: Any, error: BaseException | None) -> None:
        with self._lock:
            call_id = self._tools.pop(run_id, None)
            root = self._roots.get(run_id)
            if call_id is None or root is None:
                return
            if error is not None:  # what the graph tells the model of it, if it goes on, wins
                self._runs[root].result(
                    call_id, False, f"{type(error).__name__}: {error}", final=False
                )
                return
            ok = not (isinstance(output, ToolMessage) and output.status == "error")
            content = output.content if isinstance(output, ToolMessage) else output
            self._runs[root].result(call_id, ok, _text(content))


class _Handler(BaseCallbackHandler):
    """Tells every recording hook of the block what LangChain reports."""

    run_inline = True  # in the caller's event loop, in order, not on a worker thread

    def __init__(self, hooks: list[LangGraphHook]) -> None:
        self.hooks = hooks

    def on_chain_start(
        self,
        serialized: Any,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        for hook in self.hooks:
            hook.chain_start(run_id, parent_run_id, kwargs.get("name"))

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        for hook in self.hooks:
            hook.chain_end(run_id, outputs, None)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        for hook in self.hooks:
            hook.chain_end(run_id, None, error)

    def on_chat_model_start(
        self,
        serialized: Any,
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        params = dict(kwargs.get("invocation_params") or {})
        for hook in self.hooks:
            hook.model_start(run_id, parent_run_id, messages[0] if messages else [], params)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        for hook in self.hooks:
            hook.model_end(run_id, response, None)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        for hook in self.hooks:
            hook.model_end(run_id, None, error)

    def on_tool_start(
        self,
        serialized: Any,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        for hook in self.hooks:
            hook.tool_start(run_id, parent_run_id, kwargs.get("tool_call_id"))

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        for hook in self.hooks:
            hook.tool_end(run_id, output, None)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        for hook in self.hooks:
            hook.tool_end(run_id, None, error)


# -- LangChain records as thena_nb's ---------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            b if isinstance(b, str) else b.get("text", "")
            for b in content
            if isinstance(b, (str, dict))
        ]
        if all(
            isinstance(b, str) or b.get("type") == "text"
            for b in content
            if isinstance(b, (str, dict))
        ):
            return "".join(parts)
    return to_text(content)


def _input(messages: Sequence[BaseMessage]) -> str:
    """The run's input: the last human message the model was first sent."""
    for m in reversed(messages):
        if isinstance(m, HumanMessage):
            return _text(m.content)
    return ""


def _output(outputs: Any) -> Any:
    """The graph's answer: a message state's last message text, else its output as JSON."""
    if (
        isinstance(outputs, dict)
        and isinstance(outputs.get("messages"), list)
        and outputs["messages"]
    ):
        last = outputs["messages"][-1]
        if isinstance(last, BaseMessage):
            return _text(last.content)
    if isinstance(outputs, BaseMessage):
        return _text(outputs.content)
    return outputs if jsonable(outputs) else repr(outputs)


def _specs(tools: Sequence[Any]) -> list[ToolSpec]:
    """The bound tools (OpenAI's function form, as `bind_tools` passes them) as specs."""
    out = []
    for tool in tools:
        fn = tool.get("function", tool) if isinstance(tool, dict) else {}
        if isinstance(fn, dict) and fn.get("name"):
            out.append(
                ToolSpec(
                    name=fn["name"],
                    description=fn.get("description") or "",
                    parameters=dict(fn.get("parameters") or {}),
                )
            )
    return out


def _model_name(params: dict[str, Any]) -> str:
    for key in ("model", "model_name", "model_id", "_type"):
        value = params.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _canonical(messages: Sequence[BaseMessage], params: dict[str, Any]) -> tuple[Any, ...]:
    """What the request says, without per-run values (message ids, metadata, usage)."""
    said: list[Any] = []
    for m in messages:
        if isinstance(m, SystemMessage):
            continue  # in the request's system text
        if isinstance(m, AIMessage):
            calls = tuple(
                (c.get("id"), c["name"], json.dumps(c.get("args") or {}, sort_keys=True))
                for c in m.tool_calls
            )
            said.append(("assistant", _text(m.content), calls))
        elif isinstance(m, ToolMessage):
            said.append(("tool", m.tool_call_id, _text(m.content), m.status != "error"))
        else:
            said.append((m.type, _text(m.content)))
    settings = {k: v for k, v in params.items() if k not in ("tools", "_type") and jsonable(v)}
    return tuple(said), json.dumps(settings, sort_keys=True, default=str)


def _reply(message: Any, text: str) -> Reply:
    if not isinstance(message, AIMessage):
        return Reply(text=text)
    usage: dict[str, Any] = dict(message.usage_metadata or {})
    details: dict[str, Any] = dict(usage.get("input_token_details") or {})
    meta = message.response_metadata or {}
    finish = meta.get("finish_reason") or meta.get("stop_reason")
    return Reply(
        text=_text(message.content),
        tool_calls=[
            ToolCall(
                id=c.get("id") or f"call_{i}", name=c["name"], arguments=dict(c.get("args") or {})
            )
            for i, c in enumerate(message.tool_calls)
        ],
        finish_reason=finish if isinstance(finish, str) else None,
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        cache_read_tokens=int(details.get("cache_read") or 0),
        cache_write_tokens=int(details.get("cache_creation") or 0),
    )
