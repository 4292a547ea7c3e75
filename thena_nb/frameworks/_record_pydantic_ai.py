"""`record` for a pydantic-ai `Agent`: a recording `WrapperModel` put in with `agent.override`.

`agent.override(model=...)` is pydantic-ai's public, context-scoped way to swap an agent's
model (its tests use it); inside the block every run of the agent asks `_Recorder`, which
passes each request to the agent's own model unchanged and keeps what went each way. Runs are
told apart by pydantic-ai's run context (`run_id`), so concurrent runs are separate records.
A request's tool returns and retry prompts are the results of the previous reply's calls.

What a turn is keyed by is what `Workflow.of(agent)` keys it by (the same `canonical`
messages, instructions, tools and settings), so `Workflow.of(agent).run(x, replay=run)`
reuses a recorded run.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from pydantic_ai._run_context import get_current_run_context
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.wrapper import WrapperModel

from thena_nb.core.records._keys import blake
from thena_nb.core.records._text import to_text
from thena_nb.frameworks._record_base import Seen, Taken, clock
from thena_nb.frameworks.pydantic_ai import _model_of, _spec, _system, canonical, reply_of

__all__ = ["PydanticAIHook"]

_FINAL = "Final result processed."
"""What pydantic-ai tells the model of an output tool's call (it is not sent again)."""


class PydanticAIHook:
    """Records every run of a pydantic-ai agent inside the block (see the module)."""

    framework = "pydantic-ai"

    def __init__(self, agent: Any, name: str | None) -> None:
        found = name or getattr(agent, "name", None)
        if not found:
            raise ValueError(
                "this pydantic-ai agent has no name; give it one (`Agent(..., name='Forecaster')`)"
                " or pass `record(agent, name='Forecaster')`"
            )
        self.agent = agent
        self.name: str = found
        self._runs: dict[Any, Taken] = {}
        self._lock = threading.Lock()
        self._override: contextlib.AbstractContextManager[None] | None = None
        self.model = _model_of(self._current_model())

    def _current_model(self) -> Any:
        overridden = self.agent._override_model.get()  # an enclosing `override(model=...)`
        return overridden.value if overridden is not None else self.agent.model

    def start(self) -> None:
        model = self._current_model()
        if model is None:
            raise TypeError(
                f"pydantic-ai agent {self.name!r} has no model of its own; `record` records the "
                f"agent's model, so give it one (`Agent(model, ...)`) before recording"
            )
        self._override = self.agent.override(model=_Recorder(model, self))
        self._override.__enter__()

    def stop(self, error: BaseException | None) -> None:
        override, self._override = self._override, None
        if override is not None:
            override.__exit__(None, None, None)
        for taken in self._runs.values():
            _close(taken, error)

    def taken(self) -> list[Taken]:
        return list(self._runs.values())

    def run_of(self, key: Any, messages: Sequence[ModelMessage]) -> Taken:
        """The record of the run `key` (a new one at its first request)."""
        with self._lock:
            taken = self._runs.get(key)
            if taken is None:
                taken = self._runs[key] = Taken(input=_prompt(messages))
            return taken


def _close(taken: Taken, error: BaseException | None) -> None:
    """A run's end, as far as the model saw it: its last reply without calls to run is the
    answer (the text, or the output tool's arguments)."""
    last = taken.seen[-1] if taken.seen else None
    if last is None or last.reply is None:
        return
    outputs = last.canonical[1] if isinstance(last.canonical, tuple) else []
    pending = [c for c in last.reply.tool_calls if c.id not in last.results]
    if any(c.name not in outputs for c in pending):
        taken.error = taken.error or error
        return
    for call in pending:
        last.results[call.id] = (True, _FINAL)
    final = [c for c in last.reply.tool_calls if c.name in outputs]
    taken.output = dict(final[-1].arguments) if final else last.reply.text
    taken.ended = True
    taken.finished_at = last.started_at + timedelta(seconds=last.duration_s)


def _prompt(messages: Sequence[ModelMessage]) -> str:
    """The run's input: the last user prompt of its first request."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart):
                    return _text(part.content)
    return ""


def _results(taken: Taken, messages: Sequence[ModelMessage]) -> None:
    """The tool returns and retry prompts of the request: the last reply's calls' results."""
    last = messages[-1] if messages else None
    if not isinstance(last, ModelRequest):
        return
    for part in last.parts:
        if isinstance(part, ToolReturnPart):
            ok = getattr(part, "outcome", "success") == "success"
            taken.result(part.tool_call_id, ok, _text(part.content))
        elif isinstance(part, RetryPromptPart) and part.tool_call_id:
            taken.result(part.tool_call_id, False, _text(part.content))


def _text(content: Any) -> str:
    return content if isinstance(content, str) else to_text(content)


def _said(messages: Sequence[ModelMessage]) -> str:
    """The digest `Workflow.of(agent)` keys a request's messages by (`_Hooks._said`)."""
    h = blake()
    for message in messages:
        h.update(repr(canonical([message])).encode())
    return str(h.hexdigest())


class _Recorder(WrapperModel):
    """The agent's own model, with every request and answer kept for `record`."""

    def __init__(self, wrapped: Any, hook: PydanticAIHook) -> None:
        super().__init__(wrapped)
        self._hook = hook

    def _open(self, messages: list[ModelMessage], settings: Any, params: Any, ctx: Any) -> Seen:
        key = getattr(ctx, "run_id", None) or id(ctx)
        taken = self._hook.run_of(key, messages)
        _results(taken, messages)
        started_at, t0 = clock()
        seen = Seen(
            system=_system(params, messages),
            tools=[_spec(t) for t in [*params.function_tools, *params.output_tools]],
            canonical=(
                _said(messages),
                [t.name for t in params.output_tools],
                repr(getattr(params, "output_mode", None)),
                repr(sorted((settings or {}).items())),
            ),
            model=getattr(self.wrapped, "model_name", "") or "",
            max_tokens=int((settings or {}).get("max_tokens") or 0),
            started_at=started_at,
            t0=t0,
        )
        taken.seen.append(seen)
        return seen

    async def request(
        self, messages: list[ModelMessage], model_settings: Any, model_request_parameters: Any
    ) -> ModelResponse:
        ctx = get_current_run_context()
        seen = self._open(messages, model_settings, model_request_parameters, ctx)
        try:
            response = await self.wrapped.request(
                messages, model_settings, model_request_parameters
            )
        except BaseException as exc:
            seen.failed(exc)
            raise
        seen.answered(reply_of(response))
        return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: Any,
        model_request_parameters: Any,
        run_context: Any = None,
    ) -> AsyncIterator[Any]:
        ctx = run_context or get_current_run_context()
        seen = self._open(messages, model_settings, model_request_parameters, ctx)
        try:
            async with self.wrapped.request_stream(
                messages, model_settings, model_request_parameters, run_context
            ) as stream:
                yield stream
        except BaseException as exc:
            seen.failed(exc)
            raise
        seen.answered(reply_of(stream.get()))
