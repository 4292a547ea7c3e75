"""A smolagents agent (`ToolCallingAgent`, `CodeAgent`) as a thena_nb step, held through a
per-run copy of the agent.

smolagents runs synchronously, so the step runs `copy.run(task)` in a thread of its own and
answers that thread's questions on the event loop (`_Held.serve`): every model call and
every tool call is reported to the `TurnPort` from the step's own task, as a native turn is.
The copy (`copy.copy` of the agent with its own memory, state, monitor, managed agents and,
for a local `CodeAgent`, its own Python executor) is made for that run only, so the user's
agent is never changed and two runs of one agent at once keep to their own calls:

- its model is `_HeldModel`, a smolagents `Model` whose `generate(...)` makes each model call
  a turn (`TurnPort.model_call`). Live, the agent's own model is called (in a worker thread);
  served (replay, a fork's prefix, a resume), the recorded reply is made into the
  `ChatMessage` the model gave, with its calls' ids and arguments and its usage.
- `ToolCallingAgent`: its `execute_tool_call` is replaced on the copy. A recorded result, a
  rejection or a response is given without running the tool (a failure as smolagents'
  `AgentToolExecutionError`, which the model reads); a live call runs with the arguments a
  gate may have edited, and what the model reads of it is reported (`after_tool`). A tool
  that raises is a failed call with the message smolagents gives the model. The
  `final_answer` call ends the run: its argument is the step's output (served, the
  `final_answer` tool runs again with the recorded arguments, so the output keeps its type).
  Calls the model wrote as text (which smolagents parses, `Model.parse_tool_calls`) are
  rescued calls (`source="rescued"`).
- `CodeAgent`: each model call is a turn whose one call, `python_interpreter`, holds the code
  it wrote (`{"code": ...}`) and whose result is what the agent read back (execution logs
  and last output). **Replaying a `CodeAgent` runs its recorded code again** (the model is
  not called): tools called inside the code run again and any side effect of the code
  happens again; a recorded failure is served without running the code. Gates hold the
  code before it runs (approve, edit the code, reject, respond).

The run's history becomes the copy's memory (its own earlier turns as its action steps,
other agents' and the user's messages as task text, other agents' attributed), and each model
call's messages join the run's history, so the steps after it read them. Messages a fork
injects (`run.fork(k, inject=...)`) reach the model as a new task in its memory.

The request key covers what smolagents sends besides thena_nb's history: its messages as
role, text and calls (the system prompt is the turn's `system`), the stop sequences, the
response format and the tools.

Limits: the step runs smolagents non-streamed (`stream_outputs` is off on the copy); a
managed agent runs as one tool call of the step (its own model calls are not turns); a
`CodeAgent` with a remote executor (or one passed as `executor=`) shares that executor
between runs, as it would outside thena_nb.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import copy
import json
import threading
from collections.abc import Callable
from typing import Any

from smolagents import CodeAgent, ToolCallingAgent
from smolagents.agent_types import AgentType
from smolagents.agents import MultiStepAgent
from smolagents.local_python_executor import (
    CodeOutput,
    LocalPythonExecutor,
    fix_final_answer_code,
)
from smolagents.memory import AgentMemory, CallbackRegistry, TaskStep
from smolagents.models import ChatMessage, MessageRole, Model, parse_json_if_needed
from smolagents.monitoring import Monitor
from smolagents.utils import (
    AgentError,
    AgentToolExecutionError,
    extract_code_from_text,
    parse_code_blobs,
    truncate_content,
)

from thena_nb.core.engine.foreign import (
    ForeignAgent,
    ForeignRequest,
    GateSpec,
    Serve,
    TurnPort,
    _Live,
)
from thena_nb.core.records.model import ModelRequest, Reply
from thena_nb.core.records.types import ToolCall
from thena_nb.frameworks._smolagents_convert import (
    CODE_TOOL,
    CONTINUE,
    canonical,
    code_spec,
    message_of,
    native_calls,
    reply_of,
    spec_of,
    system_of,
    text_of,
    to_memory,
)

__all__ = ["SmolagentsStep", "is_agent"]


def is_agent(obj: Any) -> bool:
    """Whether `obj` is a smolagents agent."""
    return isinstance(obj, MultiStepAgent)


class SmolagentsStep(ForeignAgent):
    """A smolagents `ToolCallingAgent` or `CodeAgent` as a step: its whole run, one turn per
    model call.

    Example:
        >>> from smolagents import ChatMessage, Model, ToolCallingAgent
        >>> class Answer(Model):
        ...     def generate(self, messages, **kwargs):
        ...         call = {"id": "c1", "type": "function",
        ...                 "function": {"name": "final_answer", "arguments": {"answer": "Sunny."}}}
        ...         return ChatMessage(role="assistant", content=None, tool_calls=[call])
        >>> from thena_nb import Workflow
        >>> agent = ToolCallingAgent(tools=[], model=Answer(model_id="offline"),
        ...                          name="Forecaster", verbosity_level=-1)
        >>> run = Workflow.of(agent).run("Weather in Lisbon?", store=False)
        >>> run.output, run.turns[0].agent, run.turns[0].tool_calls[0].name
        ('Sunny.', 'Forecaster', 'final_answer')
    """

    framework = "smolagents"
    changeable = ("instructions", "system", "model", "max_steps", "name")

    def __init__(
        self,
        agent: Any,
        *,
        name: str | None = None,
        gate: GateSpec = None,
        overrides: dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(agent, (ToolCallingAgent, CodeAgent)):
            raise TypeError(
                f"thena_nb runs smolagents' `ToolCallingAgent` and `CodeAgent` as steps, not "
                f"a `{type(agent).__name__}`; build the agent from one of those two"
            )
        overrides = dict(overrides or {})
        if "system" in overrides:
            overrides["instructions"] = overrides.pop("system")
        step_name = self.step_name(agent, name, overrides)
        self.overrides = overrides
        model = overrides.get("model", agent.model)
        super().__init__(step_name, target=agent, model=_model_of(model), gate=gate)

    @classmethod
    def step_name(cls, agent: Any, name: str | None, overrides: dict[str, Any]) -> str:
        """The step's name: a changed one, else the agent's, else `Workflow.of(name=)`.

        Raises:
            ValueError: None of them is given (the message says how to give one).
        """
        found: str | None = overrides.get("name") or getattr(agent, "name", None) or name
        if not found:
            kind = type(agent).__name__
            raise ValueError(
                f"this smolagents agent has no name; give it one (e.g. "
                f"`{kind}(..., name='Forecaster')`) or pass "
                f"`Workflow.of(agent, name='Forecaster')`"
            )
        return found

    @property
    def code(self) -> bool:
        """Whether the agent writes code (`CodeAgent`) rather than tool calls."""
        return isinstance(self.target, CodeAgent)

    async def drive(self, port: TurnPort) -> Any:
        return await _Held(self, port).run()

    def wire(self, request: ModelRequest) -> dict[str, Any]:
        """A turn's request as smolagents' own messages (role and text, its calls and
        observations written as it writes them) and its tools."""
        steps, task = to_memory(request.messages, self.name, code=self.code)
        if task is not None:
            steps.append(TaskStep(task=task))
        messages = [{"role": "system", "content": request.system}]
        for step in steps:
            for m in step.to_messages():
                messages.append({"role": str(m.role.value), "content": text_of(m.content)})
        return {
            "messages": messages,
            "tools": [spec.model_dump(mode="json") for spec in request.tools],
        }

    def configuration(self) -> Any:
        agent = self.target
        model = self.overrides.get("model", agent.model)
        return (
            type(agent).__qualname__,
            (type(model).__qualname__, getattr(model, "model_id", None)),
            self.overrides.get("instructions", agent.instructions),
            self.overrides.get("max_steps", agent.max_steps),
            agent.planning_interval,
            [
                (
                    t.name,
                    t.description,
                    json.dumps(t.inputs, sort_keys=True, default=str),
                    getattr(type(t), "forward", None),
                )
                for t in agent.tools.values()
            ],
            sorted(agent.managed_agents),
            agent.prompt_templates.get("system_prompt"),
        )


def _model_of(model: Any) -> _Live:
    """The step's model as thena_nb names and prices it: OpenAI's own API is priced."""
    name = getattr(model, "model_id", None) or type(model).__name__
    client_kwargs = getattr(model, "client_kwargs", None)
    openai = type(model).__name__ in ("OpenAIModel", "OpenAIServerModel")
    on_openai = openai and isinstance(client_kwargs, dict) and not client_kwargs.get("base_url")
    return _Live(name, "openai" if on_openai else False)


class _Abandoned(BaseException):
    """The step ended (cancelled) while its smolagents thread still ran: that thread stops."""


_Ask = tuple[str, Any, "concurrent.futures.Future[Any]"]


class _Held:
    """One run of a smolagents agent: its copy, the thread that runs it, and the answers to
    that thread's questions (model calls, tool calls) given on the event loop."""

    def __init__(self, step: SmolagentsStep, port: TurnPort) -> None:
        self.step = step
        self.port = port
        self.code = step.code
        self.loop = asyncio.get_running_loop()
        self.inbox: asyncio.Queue[_Ask] = asyncio.Queue()
        self.aborted = False
        self.passed: list[BaseException] = []
        """Exceptions the loop sent to the thread: smolagents wraps them, the step unwraps."""
        self.first = len(port.history)
        self.delivered: set[int] = set()
        self.tasks: list[str] = []
        """Messages a fork injected, delivered to the model, not yet in the memory."""
        self.worker: threading.Thread | None = None
        self.unclaimed: list[tuple[str, str, str]] = []
        """The open turn's calls as smolagents will run them: (id, name, arguments)."""
        overrides = step.overrides
        self.real: Model = overrides.get("model", step.target.model)
        self.agent = _copy(step.target, _HeldModel(self, self.real))
        if "instructions" in overrides:
            self.agent.instructions = overrides["instructions"]
        if "max_steps" in overrides:
            self.agent.max_steps = int(overrides["max_steps"])
        self.original: Callable[[str, Any], Any] = getattr(self.agent, "execute_tool_call", _none)
        if self.code:
            self.agent.python_executor = _HeldExecutor(self, self.agent.python_executor)
        else:
            self.agent.execute_tool_call = self.execute

    # -- the loop's side ---------------------------------------------------------------------

    async def run(self) -> Any:
        """Run the copy over the run's history in its thread, answering its questions here;
        its output (`final_answer`'s argument) is the step's."""
        steps, task = to_memory(self.port.history, self.step.name, code=self.code)
        self.agent.memory.steps = list(steps)
        context = contextvars.copy_context()
        worker = threading.Thread(
            target=context.run,
            args=(self._work, task if task is not None else CONTINUE),
            name=f"smolagents {self.step.name}",
            daemon=True,
        )
        self.worker = worker
        worker.start()
        try:
            while True:
                kind, payload, answer = await self.inbox.get()
                if kind == "done":
                    worker.join(timeout=1.0)  # it posted its last word: it is ending now
                    ok, value = payload
                    if ok:
                        return value.to_raw() if isinstance(value, AgentType) else value
                    raise self._unwrapped(value)
                await self._answer(kind, payload, answer)
        except BaseException:
            self.aborted = True  # the thread's next question is refused, and so is this one
            while not self.inbox.empty():
                _, _, answer = self.inbox.get_nowait()
                answer.set_exception(_Abandoned())
            raise

    async def _answer(
        self, kind: str, payload: Any, answer: concurrent.futures.Future[Any]
    ) -> None:
        try:
            if kind == "model":
                value = await self.on_model(*payload)
            else:
                fn, args, kwargs = payload
                value = fn(*args, **kwargs)
        except asyncio.CancelledError:
            raise  # the step is cancelled: `run` refuses the thread's questions from now on
        except BaseException as exc:
            self.passed.append(exc)
            answer.set_exception(exc)
            if not isinstance(exc, Exception):  # a stop, a budget, a loop's break
                await self._until_done()
                raise
            return
        answer.set_result(value)

    async def _until_done(self) -> None:
        """A stop or a budget ended the run: let the thread unwind (its questions refused)."""
        while True:
            kind, _, answer = await self.inbox.get()
            if kind == "done":
                if self.worker is not None:
                    self.worker.join(timeout=1.0)
                return
            answer.set_exception(_Abandoned())

    def _unwrapped(self, exc: BaseException) -> BaseException:
        """What the thread raised, without smolagents' wrapping of what the loop sent it
        (a model's error, a stop): users catch their own exception types."""
        cause = exc.__cause__
        if (
            isinstance(exc, AgentError)
            and cause is not None
            and any(cause is p for p in self.passed)
        ):
            return cause
        return exc

    async def on_model(
        self,
        messages: list[Any],
        stop_sequences: list[str] | None,
        response_format: dict[str, Any] | None,
        tools: list[Any] | None,
        kwargs: dict[str, Any],
    ) -> ChatMessage:
        """A model call of the copy as a turn: the model's own message, or the recorded reply
        made into the message the model gave."""
        real = self.real
        got: dict[str, ChatMessage] = {}
        tools = list(tools or [])

        async def live() -> Reply:
            sent = list(messages)
            for text in self._injected():
                sent += TaskStep(task=text).to_messages()
            message = await asyncio.to_thread(
                real.generate, sent, stop_sequences=stop_sequences,
                response_format=response_format, tools_to_call_from=tools or None, **kwargs,
            )  # fmt: skip
            message, calls = self._calls_in(message)
            got["message"] = message
            return reply_of(message, calls)

        settings = getattr(real, "kwargs", None) or {}
        asked = ForeignRequest(
            system=system_of(messages),
            tools=[code_spec()] if self.code else [spec_of(t) for t in tools],
            canonical=(
                canonical(messages),
                repr(stop_sequences),
                json.dumps(response_format, sort_keys=True, default=str),
                repr(sorted((k, repr(v)) for k, v in kwargs.items())),
            ),
            live=live,
            model=self.step.model.name,
            max_tokens=int(settings.get("max_tokens") or 0),
        )
        reply, proposed, served = await self.port.model_call(asked)
        self._injected()  # a served turn's injected messages join the memory too
        memory = self.agent.memory.steps
        memory += [TaskStep(task=text) for text in self.tasks]
        self.tasks = []
        message = got["message"] if not served and "message" in got else None
        if message is None:
            message = message_of(reply, proposed, code=self.code)
        self.unclaimed = [
            (str(c.id), c.function.name, _key(parse_json_if_needed(c.function.arguments)))
            for c in message.tool_calls or ()
        ]
        if self.code:
            self.unclaimed = [(str(c.id), CODE_TOOL, "") for c in proposed]
        return message

    def _injected(self) -> list[str]:
        """User messages put into the history since the step began (a fork's `inject`):
        each once, for the model call and then the memory."""
        history = self.port.history
        found = []
        for i in range(self.first, len(history)):
            m = history[i]
            if m.role == "user" and i not in self.delivered:
                self.delivered.add(i)
                found.append(m.content)
        self.tasks += found
        return found

    def _calls_in(self, message: ChatMessage) -> tuple[ChatMessage, list[ToolCall]]:
        """The calls the agent will run from the model's message: native ones, else those
        smolagents parses from its text (rescued); a `CodeAgent`'s code as one call."""
        if self.code:
            return message, self._code_call(message)
        calls = native_calls(message)
        if calls or not message.content:
            return message, calls
        plain = ChatMessage(
            role=MessageRole.ASSISTANT, content=message.content,
            raw=message.raw, token_usage=message.token_usage,
        )  # fmt: skip
        try:
            parsed = self.real.parse_tool_calls(plain)
        except Exception:
            return message, []  # smolagents tells the model it found no call
        return parsed, [c.model_copy(update={"source": "rescued"}) for c in native_calls(parsed)]

    def _code_call(self, message: ChatMessage) -> list[ToolCall]:
        """The code a `CodeAgent` will run from this message, parsed as smolagents does."""
        agent = self.agent
        assert isinstance(agent, CodeAgent)
        text = text_of(message.content)
        closing = agent.code_block_tags[1]
        try:
            if agent._use_structured_outputs_internally:
                code = json.loads(text)["code"]
                code = extract_code_from_text(code, agent.code_block_tags) or code
            else:
                if text and not text.strip().endswith(closing):
                    text += closing
                code = parse_code_blobs(text, agent.code_block_tags)
            code = fix_final_answer_code(code)
        except Exception:
            return []  # smolagents tells the model it found no code
        call_id = f"call_{len(agent.memory.steps) + len(self.tasks)}"  # smolagents' own id
        return [ToolCall(id=call_id, name=CODE_TOOL, arguments={"code": code})]

    def claim(self, name: str, arguments: Any) -> str | None:
        """The id of the open turn's call that smolagents is about to run as `name`."""
        key = "" if name == CODE_TOOL else _key(arguments)
        for i, (call_id, found, said) in enumerate(self.unclaimed):
            if found == name and said == key:
                del self.unclaimed[i]
                return call_id
        return None

    # -- the thread's side ---------------------------------------------------------------------

    def _work(self, task: str) -> None:
        try:
            output = self.agent.run(task, reset=False, return_full_result=False)
        except BaseException as exc:
            self._post("done", (False, exc))
        else:
            self._post("done", (True, output))

    def _post(self, kind: str, payload: Any) -> concurrent.futures.Future[Any]:
        answer: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            self.loop.call_soon_threadsafe(self.inbox.put_nowait, (kind, payload, answer))
        except RuntimeError:  # the loop is closed: nobody will answer
            answer.set_exception(_Abandoned())
        return answer

    def ask(self, kind: str, payload: Any) -> Any:
        """Ask the loop (from the thread) and wait for its answer."""
        if self.aborted:
            raise _Abandoned()
        answer = self._post(kind, payload)
        while True:
            try:
                return answer.result(timeout=0.25)
            except concurrent.futures.TimeoutError:
                if self.aborted:
                    raise _Abandoned() from None

    def on_loop(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call `fn` on the loop, in the step's task, from the thread."""
        return self.ask("call", (fn, args, kwargs))

    def execute(self, tool_name: str, arguments: Any) -> Any:
        """The copy's `execute_tool_call`: asks the port first, runs the tool as smolagents
        does, and reports what the model reads of it."""
        call_id = self.on_loop(self.claim, tool_name, arguments)
        got = self.on_loop(self.port.before_tool, call_id) if call_id is not None else None
        if got is None:
            return self.original(tool_name, arguments)
        port = self.port
        if isinstance(got, Serve):
            decided = self.on_loop(port.decision_of, call_id)
            answered = decided is not None and decided.decision == "respond"
            if got.ok and tool_name == "final_answer" and decided is not None and not answered:
                return self.original(tool_name, decided.arguments)  # the output keeps its type
            if got.ok:
                return got.text
            raise AgentToolExecutionError(got.text, self.agent.logger)
        run_with = dict(got.arguments) if got.decision == "edit" else arguments
        try:
            value = self.original(tool_name, run_with)
        except AgentError as exc:
            error = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
            self.on_loop(port.after_tool, call_id, error=error, message=str(exc))
            raise
        except Exception as exc:
            self.on_loop(port.after_tool, call_id, error=exc)
            raise
        self.on_loop(port.after_tool, call_id, result=str(value).strip())
        return value


def _none(tool_name: str, arguments: Any) -> Any:
    raise AssertionError("a `CodeAgent` runs its tools inside its code")


def _key(arguments: Any) -> str:
    return json.dumps(arguments or {}, sort_keys=True, default=str)


class _HeldModel(Model):  # type: ignore[misc]  # smolagents has no types: `Model` is Any
    """The copy's model: each `generate` a turn of the step, answered on the loop."""

    def __init__(self, held: _Held, real: Model) -> None:
        super().__init__(model_id=getattr(real, "model_id", None))
        self.held = held
        self.real = real

    def generate(
        self,
        messages: list[Any],
        stop_sequences: list[str] | None = None,
        response_format: dict[str, str] | None = None,
        tools_to_call_from: list[Any] | None = None,
        **kwargs: Any,
    ) -> ChatMessage:
        payload = (list(messages), stop_sequences, response_format, tools_to_call_from, kwargs)
        message: ChatMessage = self.held.ask("model", payload)
        return message

    def parse_tool_calls(self, message: ChatMessage) -> ChatMessage:
        parsed: ChatMessage = self.real.parse_tool_calls(message)
        return parsed


class _Refused(Exception):
    """A gate rejected the code: smolagents tells the model this message."""


class _HeldExecutor:
    """The copy's Python executor (`CodeAgent`): each run of code asks the port first."""

    def __init__(self, held: _Held, inner: Any) -> None:
        self.held = held
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __call__(self, code: str) -> CodeOutput:
        held, port = self.held, self.held.port
        call_id = held.on_loop(held.claim, CODE_TOOL, code)
        got = held.on_loop(port.before_tool, call_id) if call_id is not None else None
        if got is None:
            output: CodeOutput = self.inner(code)
            return output
        if isinstance(got, Serve):
            decided = held.on_loop(port.decision_of, call_id)
            if not got.ok:
                raise _Refused(got.text)  # rejected, or failed when recorded: not run again
            if decided is not None and decided.decision == "respond":
                return CodeOutput(output=got.text, logs="", is_final_answer=False)
            arguments = decided.arguments if decided is not None else {"code": code}
            output = self.inner(str(arguments.get("code", code)))  # replay: the code runs again
            return output
        run = str(got.arguments.get("code", code)) if got.decision == "edit" else code
        try:
            output = self.inner(run)
        except Exception as exc:
            held.on_loop(port.after_tool, call_id, error=exc, message=str(exc))
            raise
        said = "Execution logs:\n" + output.logs
        said += "Last output from code snippet:\n" + truncate_content(str(output.output))
        held.on_loop(port.after_tool, call_id, result=said)
        return output


def _copy(agent: MultiStepAgent, model: Model | None = None) -> Any:
    """A copy of `agent` for one run: its own memory, state, monitor and callbacks (the
    user's callbacks kept), managed agents copied the same way, and a fresh local Python
    executor for a `CodeAgent` that has one; the model replaced when given."""
    held = copy.copy(agent)
    if model is not None:
        held.model = model
    held.state = dict(agent.state)
    held.memory = AgentMemory(agent.memory.system_prompt.system_prompt)
    held.tools = dict(agent.tools)
    held.managed_agents = {n: _copy(a) for n, a in agent.managed_agents.items()}
    held.monitor = Monitor(held.model, agent.logger)
    registry = CallbackRegistry()
    old = agent.monitor.update_metrics
    for step_cls, callbacks in agent.step_callbacks._callbacks.items():
        for callback in callbacks:
            registry.register(
                step_cls, held.monitor.update_metrics if callback == old else callback
            )
    held.step_callbacks = registry
    held.stream_outputs = False
    held.step_number = 0
    if isinstance(held, CodeAgent) and isinstance(agent.python_executor, LocalPythonExecutor):
        held.python_executor = held.create_python_executor()
    return held
