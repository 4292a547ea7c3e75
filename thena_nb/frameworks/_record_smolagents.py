"""`record` for a smolagents `ToolCallingAgent` or `CodeAgent`: its model, its tool calls (or
its code's runs) and its step callbacks, held on the agent for the block.

smolagents gives a step callback each `ActionStep` (what the model was sent, its message, the
step's calls and joined observations), but not each call's own result nor the rest of what
the model was asked (the stop sequences, the tools it may call, the response format), which a
turn's request key covers. So the block holds the agent where `Workflow.of(agent)` holds its
per-run copy (`smolagents.py`), keeping the same records with the same conversions:

- `agent.model` is a `_Recorder` that passes every `generate` (or `generate_stream`) and
  `parse_tool_calls` to the agent's own model unchanged and keeps the request as
  `Workflow.of(agent)` keys it, so `Workflow.of(agent).run(x, replay=run)` serves a recorded
  run. Calls the model wrote as text, which smolagents parses, are rescued calls.
- `ToolCallingAgent`: `agent.execute_tool_call` runs each call as smolagents does and keeps
  what the model reads of it (`str(result).strip()`, or smolagents' error message).
- `CodeAgent`: `agent.python_executor` runs the code as smolagents does; the turn's one call,
  `python_interpreter`, holds the code and its result is what the agent read back (execution
  logs and the last output). A replay of a `CodeAgent` runs its recorded code again (see
  `smolagents.py`).
- `agent.step_callbacks` gives the agent's own callbacks every step, after noting the final
  answer (`FinalAnswerStep`): the run's output.

A run is told by the task smolagents puts in the agent's memory when `agent.run(task)` starts
(its `TaskStep`): the model calls after it are that run's turns. One smolagents agent runs one
task at a time (its memory is the run's), so runs in the block follow one another. Everything
is put back when the block ends, also when it raises.

Limits: a managed agent's run is one tool call of the run (its own model calls are not turns),
as in `Workflow.of(agent)`. `Workflow.of(agent)` runs smolagents non-streamed; smolagents keeps
a streamed reply without text as `""` where a non-streamed one is `None`, so the request after
it differs by a newline and the replay of a streamed run (`stream_outputs=True`) goes live
there.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from smolagents import CodeAgent, ToolCallingAgent
from smolagents.agent_types import AgentType
from smolagents.memory import FinalAnswerStep, TaskStep
from smolagents.models import ChatMessage, Model, agglomerate_stream_deltas, parse_json_if_needed
from smolagents.utils import AgentError, truncate_content

from thena_nb.core.parts.tools import error_observation
from thena_nb.core.records.types import ToolCall
from thena_nb.frameworks._record_base import Seen, Taken, clock, close_unended
from thena_nb.frameworks._smolagents_convert import (
    CODE_TOOL,
    canonical,
    code_spec,
    native_calls,
    reply_of,
    spec_of,
    system_of,
)
from thena_nb.frameworks.smolagents import _key, _model_of

__all__ = ["SmolagentsHook"]


class SmolagentsHook:
    """Records every run of a smolagents agent inside the block (see the module)."""

    framework = "smolagents"

    def __init__(self, agent: Any, name: str | None) -> None:
        if not isinstance(agent, (ToolCallingAgent, CodeAgent)):
            raise TypeError(
                f"`record` takes smolagents' `ToolCallingAgent` and `CodeAgent`, not a "
                f"`{type(agent).__name__}`"
            )
        found = getattr(agent, "name", None) or name
        if not found:
            raise ValueError(
                f"this smolagents agent has no name; give it one (e.g. "
                f"`{type(agent).__name__}(..., name='Forecaster')`) or pass "
                f"`record(agent, name='Forecaster')`"
            )
        self.agent = agent
        self.name: str = found
        self.code = isinstance(agent, CodeAgent)
        self.model = _model_of(agent.model)
        self._runs: list[Taken] = []
        self._task: Any = None
        """The `TaskStep` of the run being recorded."""
        self._unclaimed: list[tuple[str, str, str]] = []
        """The last reply's calls as smolagents will run them: (id, name, arguments)."""
        self._held: list[tuple[str, bool, Any, Any]] = []
        self._real: Any = agent.model
        self._lock = threading.Lock()

    def start(self) -> None:
        agent = self.agent
        real = self._real = agent.model
        recorder = _Streaming if hasattr(real, "generate_stream") else _Recorder
        self._hold("model", recorder(self, real))
        self._hold("step_callbacks", _Callbacks(self, agent.step_callbacks))
        if self.code:
            self._hold("python_executor", _Executor(self, agent.python_executor))
        else:
            self._hold("execute_tool_call", self._execute(agent.execute_tool_call))

    def _hold(self, attribute: str, value: Any) -> None:
        """Set the agent's `attribute` for the block, keeping what was there."""
        own = vars(self.agent)
        self._held.append((attribute, attribute in own, own.get(attribute), value))
        setattr(self.agent, attribute, value)

    def stop(self, error: BaseException | None) -> None:
        held, self._held = self._held, []
        own = vars(self.agent)
        for attribute, had, before, mine in reversed(held):
            if own.get(attribute) is not mine:
                continue  # changed inside the block: the caller's now
            if had:
                setattr(self.agent, attribute, before)
            else:
                delattr(self.agent, attribute)
        with self._lock:
            for taken in self._runs:
                close_unended(taken, error, self.framework)

    def taken(self) -> list[Taken]:
        return list(self._runs)

    # -- what the held seams tell --------------------------------------------------------

    def _current(self) -> Taken:
        """The run the agent is in: a new one when its memory holds a new task."""
        steps = self.agent.memory.steps
        task = next((s for s in reversed(steps) if isinstance(s, TaskStep)), None)
        if not self._runs or task is not self._task:
            self._task = task
            self._runs.append(Taken(input=task.task if task is not None else ""))
        return self._runs[-1]

    def asked(
        self,
        messages: list[Any],
        stop_sequences: list[str] | None,
        response_format: Any,
        tools: list[Any] | None,
        kwargs: dict[str, Any],
    ) -> Seen:
        """A model call opens: its request as `Workflow.of(agent)` keys it (`on_model`)."""
        settings = getattr(self._real, "kwargs", None) or {}
        started_at, t0 = clock()
        seen = Seen(
            system=system_of(messages),
            tools=[code_spec()] if self.code else [spec_of(t) for t in tools or []],
            canonical=(
                canonical(messages),
                repr(stop_sequences),
                json.dumps(response_format, sort_keys=True, default=str),
                repr(sorted((k, repr(v)) for k, v in kwargs.items())),
            ),
            model=self.model.name,
            max_tokens=int(settings.get("max_tokens") or 0),
            started_at=started_at,
            t0=t0,
        )
        with self._lock:
            self._current().seen.append(seen)
            self._unclaimed = []
        return seen

    def answered(self, seen: Seen, message: ChatMessage) -> None:
        """The model answered `message`: its native calls (a `CodeAgent`'s code is its call
        once smolagents runs it)."""
        calls = [] if self.code else native_calls(message)
        seen.answered(reply_of(message, calls))
        if not self.code:
            self._expect(message)

    def rescued(self, parsed: ChatMessage) -> None:
        """smolagents parsed the calls the model wrote as text (its message had none)."""
        with self._lock:
            seen = self._runs[-1].seen[-1] if self._runs and self._runs[-1].seen else None
            if seen is None or seen.reply is None:
                return
            calls = [c.model_copy(update={"source": "rescued"}) for c in native_calls(parsed)]
            finish = "tool_calls" if calls else "stop"
            seen.reply = seen.reply.model_copy(
                update={"tool_calls": calls, "finish_reason": finish}
            )
        self._expect(parsed)

    def _expect(self, message: ChatMessage) -> None:
        with self._lock:
            self._unclaimed = [
                (str(c.id), c.function.name, _key(parse_json_if_needed(c.function.arguments)))
                for c in message.tool_calls or ()
            ]

    def claim(self, name: str, arguments: Any) -> str | None:
        """The id of the last reply's call smolagents is about to run as `name`."""
        key = _key(arguments)
        with self._lock:
            for i, (call_id, found, said) in enumerate(self._unclaimed):
                if found == name and said == key:
                    del self._unclaimed[i]
                    return call_id
        return None

    def code_call(self, code: str) -> str | None:
        """A `CodeAgent` runs `code`: the last reply's call, with smolagents' own id."""
        call_id = f"call_{len(self.agent.memory.steps)}"
        with self._lock:
            seen = self._runs[-1].seen[-1] if self._runs and self._runs[-1].seen else None
            if seen is None or seen.reply is None:
                return None
            call = ToolCall(id=call_id, name=CODE_TOOL, arguments={"code": code})
            update = {"tool_calls": [call], "finish_reason": "tool_calls"}
            seen.reply = seen.reply.model_copy(update=update)
        return call_id

    def tool_done(self, call_id: str | None, ok: bool, text: str) -> None:
        if call_id is not None:
            with self._lock:
                self._runs[-1].result(call_id, ok, text)

    def ended(self, output: Any) -> None:
        """The run's final answer."""
        with self._lock:
            if not self._runs:
                return
            taken = self._runs[-1]
        taken.output = output.to_raw() if isinstance(output, AgentType) else output
        taken.ended, taken.finished_at = True, datetime.now(UTC)

    def _execute(self, original: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
        """`execute_tool_call` for the block: smolagents' own, its outcome kept."""

        def execute(tool_name: str, arguments: Any) -> Any:
            call_id = self.claim(tool_name, arguments)
            try:
                value = original(tool_name, arguments)
            except AgentError as exc:
                self.tool_done(call_id, False, str(exc))  # what smolagents tells the model
                raise
            except Exception as exc:
                shown = arguments if isinstance(arguments, dict) else {"input": arguments}
                self.tool_done(call_id, False, error_observation(tool_name, shown, exc=exc))
                raise
            self.tool_done(call_id, True, str(value).strip())
            return value

        return execute


class _Recorder(Model):  # type: ignore[misc]  # smolagents has no types: `Model` is Any
    """The agent's own model for the block: every call passed on unchanged, and kept."""

    def __init__(self, hook: SmolagentsHook, real: Any) -> None:
        super().__init__(model_id=getattr(real, "model_id", None))
        self.hook = hook
        self.real = real

    def __getattr__(self, name: str) -> Any:
        if name == "real":
            raise AttributeError(name)
        return getattr(self.real, name)

    def generate(
        self,
        messages: list[Any],
        stop_sequences: list[str] | None = None,
        response_format: dict[str, str] | None = None,
        tools_to_call_from: list[Any] | None = None,
        **kwargs: Any,
    ) -> ChatMessage:
        seen = self.hook.asked(
            messages, stop_sequences, response_format, tools_to_call_from, kwargs
        )
        try:
            message: ChatMessage = self.real.generate(
                messages, stop_sequences=stop_sequences, response_format=response_format,
                tools_to_call_from=tools_to_call_from, **kwargs,
            )  # fmt: skip
        except BaseException as exc:
            seen.failed(exc)
            raise
        self.hook.answered(seen, message)
        return message

    def parse_tool_calls(self, message: ChatMessage) -> ChatMessage:
        parsed: ChatMessage = self.real.parse_tool_calls(message)
        self.hook.rescued(parsed)
        return parsed


class _Streaming(_Recorder):
    """The recorder of a model that streams (an agent with `stream_outputs=True` asks it to)."""

    def generate_stream(
        self,
        messages: list[Any],
        stop_sequences: list[str] | None = None,
        response_format: dict[str, str] | None = None,
        tools_to_call_from: list[Any] | None = None,
        **kwargs: Any,
    ) -> Iterator[Any]:
        seen = self.hook.asked(
            messages, stop_sequences, response_format, tools_to_call_from, kwargs
        )
        deltas: list[Any] = []
        try:
            for delta in self.real.generate_stream(
                messages, stop_sequences=stop_sequences, response_format=response_format,
                tools_to_call_from=tools_to_call_from, **kwargs,
            ):  # fmt: skip
                deltas.append(delta)
                yield delta
        except Exception as exc:
            seen.failed(exc)
            raise
        self.hook.answered(seen, agglomerate_stream_deltas(deltas))


class _Executor:
    """A `CodeAgent`'s Python executor for the block: each run of code kept as the turn's
    call, with what the agent reads back of it."""

    def __init__(self, hook: SmolagentsHook, inner: Any) -> None:
        self.hook = hook
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __call__(self, code: str) -> Any:
        call_id = self.hook.code_call(code)
        try:
            output = self.inner(code)
        except Exception as exc:
            self.hook.tool_done(call_id, False, str(exc))
            raise
        said = "Execution logs:\n" + output.logs
        said += "Last output from code snippet:\n" + truncate_content(str(output.output))
        self.hook.tool_done(call_id, True, said)
        return output


class _Callbacks:
    """The agent's step callbacks for the block: the final answer noted, then every step given
    to the agent's own callbacks."""

    def __init__(self, hook: SmolagentsHook, inner: Any) -> None:
        self.hook = hook
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def register(self, step_cls: Any, callback: Callable[..., Any]) -> None:
        self.inner.register(step_cls, callback)

    def callback(self, memory_step: Any, **kwargs: Any) -> None:
        if isinstance(memory_step, FinalAnswerStep):
            self.hook.ended(memory_step.output)
        self.inner.callback(memory_step, **kwargs)
