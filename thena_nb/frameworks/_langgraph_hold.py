"""Where the LangGraph step holds a graph: its chat models at LangChain's LLM cache, its
tools at a copy of each `ToolNode`, and one run of the graph answered from the step's task.

- `_Watch`, a callback handler given to the run (`config["callbacks"]`), sees every chat
  model call start (its messages, its bound tools and settings) and marks it as the
  current call of its context (`_CALL`).
- `_Dispatch`, a `BaseCache` installed as LangChain's global LLM cache while a step runs,
  answers the current call's `lookup`: a served answer (replay) is returned as the cache's
  hit, else `None` lets LangChain call its model, whose answer comes back through `update`
  (where the turn's gates decide its calls before the graph goes on). Calls of no thena_nb
  step go to the cache that was installed before (or none).
- `held_graph` is a copy of the graph (`Pregel.copy`) whose `ToolNode`s are rebuilt with a
  `wrap_tool_call` that asks the port before a call runs: a recorded result, a rejection
  or a response comes back as the `ToolMessage` without running the tool; an edit runs the
  tool with the gate's arguments.
- `_Run` runs the graph in a task of its own and answers its questions (`serve`) in the
  step's task, as a native turn runs: the session's pause points, stop, budget and gates
  all apply there.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID

from langchain_core.caches import BaseCache
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.globals import get_llm_cache, set_llm_cache
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import ToolNode
from langgraph.pregel import Pregel

from thena_nb.core.engine.foreign import ForeignRequest, Serve, TurnPort
from thena_nb.core.records._keys import blake
from thena_nb.core.records._text import to_text
from thena_nb.core.records.model import Reply
from thena_nb.core.records.types import ToolCall
from thena_nb.frameworks._langgraph_convert import (
    canonical,
    message_of,
    output_of,
    reply_of,
    specs_of,
    stable,
    system_of,
    text_of,
    to_langchain,
)

__all__ = ["SUPPORTED", "ToolFailed", "asked_tools", "held_graph", "run_graph"]


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class HeldStep(Protocol):
    """What running a graph reads of its step (a `LangGraphStep`): its names, the held copy
    of the graph, its model and the tools the graph stops for."""

    @property
    def name(self) -> str: ...
    @property
    def framework(self) -> str: ...
    @property
    def held(self) -> Pregel[Any, Any, Any, Any]: ...
    @property
    def model(self) -> _Named: ...
    @property
    def asks(self) -> frozenset[str]: ...


SUPPORTED = (
    "a thena_nb step runs a compiled LangGraph graph whose state holds the conversation as "
    "`messages` and whose nodes call LangChain chat models with `invoke`/`ainvoke`, one at "
    "a time, and run tools in a `ToolNode` (langgraph.prebuilt): an agent from "
    "`langchain.agents.create_agent`, or a `StateGraph(MessagesState)` with such nodes"
)
"""What the step's errors say it supports."""


@dataclass(eq=False)
class _Call:
    """One chat model call of the graph, from its start to its answer."""

    run: _Run
    messages: list[BaseMessage]
    params: dict[str, Any]
    metadata: dict[str, Any]
    model: str
    looked_up: bool = False
    finished: bool = False
    went_live: bool = False
    answer: asyncio.Future[list[ChatGeneration] | None] | None = None
    """What the cache's lookup returns: the served answer, or `None` to call the model."""
    reply: asyncio.Future[Reply] | None = None
    """The model's own answer, once LangChain has it (`update`), or its error."""
    settled: asyncio.Future[None] | None = None
    """Set when the turn's gates have decided its calls: the graph goes on."""


@dataclass(eq=False)
class _ToolRun:
    call_id: str
    error: BaseException | None = None


_RUN: contextvars.ContextVar[_Run | None] = contextvars.ContextVar("thena_lg_run", default=None)
_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("thena_lg_call", default=None)
_IN_TOOL: contextvars.ContextVar[_ToolRun | None] = contextvars.ContextVar(
    "thena_lg_tool", default=None
)
"""Set while a held tool runs: a chat model it calls is part of the tool, not a turn."""


# -- the LLM cache -----------------------------------------------------------------------------


def _ours() -> _Call | None:
    """The current context's chat model call, when it is a step's and not looked up yet."""
    call = _CALL.get()
    return call if call is not None and not call.looked_up else None


def _answered() -> _Call | None:
    call = _CALL.get()
    return call if call is not None and call.looked_up and not call.finished else None


class _Dispatch(BaseCache):
    """LangChain's global LLM cache while a step runs: a step's calls to the step, any other
    call to the cache installed before it (`inner`)."""

    def __init__(self, inner: BaseCache | None) -> None:
        self.inner = inner

    def lookup(self, prompt: str, llm_string: str) -> Any:
        call = _ours()
        if call is None:
            return self.inner.lookup(prompt, llm_string) if self.inner is not None else None
        return call.run.from_thread(call.run.lookup(call))

    async def alookup(self, prompt: str, llm_string: str) -> Any:
        call = _ours()
        if call is None:
            inner = self.inner
            return await inner.alookup(prompt, llm_string) if inner is not None else None
        return await call.run.lookup(call)

    def update(self, prompt: str, llm_string: str, return_val: Sequence[Any]) -> None:
        call = _answered()
        if call is None:
            if self.inner is not None:
                self.inner.update(prompt, llm_string, return_val)
            return
        call.run.from_thread(call.run.update(call, return_val))

    async def aupdate(self, prompt: str, llm_string: str, return_val: Sequence[Any]) -> None:
        call = _answered()
        if call is None:
            if self.inner is not None:
                await self.inner.aupdate(prompt, llm_string, return_val)
            return
        await call.run.update(call, return_val)

    def clear(self, **kwargs: Any) -> None:
        if self.inner is not None:
            self.inner.clear(**kwargs)

    async def aclear(self, **kwargs: Any) -> None:
        if self.inner is not None:
            await self.inner.aclear(**kwargs)


_LOCK = threading.Lock()
_RUNNING = [0]
"""How many steps run now: the dispatcher is LangChain's cache while any does."""


def _install() -> None:
    with _LOCK:
        current = get_llm_cache()
        if not isinstance(current, _Dispatch):
            set_llm_cache(_Dispatch(current))
        _RUNNING[0] += 1


def _uninstall() -> None:
    with _LOCK:
        _RUNNING[0] -= 1
        current = get_llm_cache()
        if _RUNNING[0] == 0 and isinstance(current, _Dispatch):
            set_llm_cache(current.inner)


# -- callbacks -------------------------------------------------------------------------------


class _Watch(BaseCallbackHandler):
    """The run's callback handler: the start of each chat model call, and what the cache
    cannot see (a model's error, its streamed text, a tool run outside a held `ToolNode`)."""

    run_inline = True  # called in the caller's context, so `_CALL` reaches the cache
    raise_error = True

    def __init__(self, run: _Run) -> None:
        self.run = run
        self.started: dict[UUID, _Call] = {}

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], *, run_id: UUID,
        metadata: dict[str, Any] | None = None, **kwargs: Any,
    ) -> None:  # fmt: skip
        if _IN_TOOL.get() is not None:
            _CALL.set(None)  # a model a tool calls is part of the tool
            return
        if len(messages) != 1:
            raise ValueError(
                f"{self.run.step.framework} step {self.run.step.name!r}: a chat model was "
                f"asked {len(messages)} conversations at once (`generate`/`batch`); {SUPPORTED}"
            )
        name = serialized.get("name") or (serialized.get("id") or ["chat model"])[-1]
        call = _Call(self.run, list(messages[0]), dict(kwargs.get("invocation_params") or {}),
                     dict(metadata or {}), str(name))  # fmt: skip
        self.started[run_id] = call
        _CALL.set(call)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        call = self.started.pop(run_id, None)
        if call is not None and not call.looked_up:
            raise ValueError(
                f"the chat model {call.model} of {self.run.step.framework} step "
                f"{self.run.step.name!r} answered without the step: it is reached through "
                "LangChain's LLM cache, which a model with `cache=False` or a cache of its "
                "own (`cache=...`), or a model called with `.stream()`/`.astream()` in a "
                "node, does not consult. Call it with `invoke`/`ainvoke` and leave its "
                f"`cache` unset; {SUPPORTED}"
            )

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        call = self.started.pop(run_id, None)
        if call is not None and call.went_live:
            self.run.on_loop(lambda: _settle(call.reply, error=error))

    def on_llm_new_token(self, token: Any, *, run_id: UUID, **kwargs: Any) -> None:
        call = self.started.get(run_id)
        if call is not None and call.went_live and isinstance(token, str) and token:
            port = self.run.port
            self.run.on_loop(lambda: port.text_delta(token))

    def on_tool_start(
        self, serialized: dict[str, Any], input_str: str, *, run_id: UUID, **kwargs: Any
    ) -> None:
        call_id = kwargs.get("tool_call_id")
        if _IN_TOOL.get() is None and call_id and self.run.port.decision_of(call_id) is not None:
            raise ValueError(
                f"{self.run.step.framework} step {self.run.step.name!r}: the tool "
                f"{serialized.get('name')!r} ran outside a `ToolNode`, where the step can "
                f"neither replay nor gate it; {SUPPORTED}"
            )

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        running = _IN_TOOL.get()
        if running is not None:
            running.error = error  # the traceback of a call the ToolNode made a message of


def _settle(
    future: asyncio.Future[Any] | None, value: Any = None, *, error: BaseException | None = None
) -> None:
    if future is None or future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


# -- tools -----------------------------------------------------------------------------------


def held_graph(graph: Pregel[Any, Any, Any, Any]) -> Pregel[Any, Any, Any, Any]:
    """A copy of `graph` (and of the graphs that are its nodes) whose `ToolNode`s ask the
    running step before each call; without a checkpointer or compiled interrupts (the
    step's history is the conversation, and its gates hold the tools)."""
    nodes = {}
    for name, node in graph.nodes.items():
        bound = node.bound
        if isinstance(bound, ToolNode):
            nodes[name] = node.copy({"bound": _held_tool_node(bound)})
        elif isinstance(bound, Pregel):
            inner = held_graph(bound)
            nodes[name] = node.copy({"bound": inner, "subgraphs": [inner]})
    update: dict[str, Any] = {
        "checkpointer": None,
        "interrupt_before_nodes": [],
        "interrupt_after_nodes": [],
    }
    if nodes:
        update["nodes"] = {**graph.nodes, **nodes}
    return graph.copy(update)


ToolNext = Callable[[Any], Any]


def _held_tool_node(node: ToolNode) -> ToolNode:
    """`node` rebuilt with a wrapper that asks the running step (outermost, around the
    node's own wrappers: a served call runs none of them)."""
    inner = _setting(node, "_wrap_tool_call")
    ainner = _setting(node, "_awrap_tool_call")

    def wrap(request: Any, execute: ToolNext) -> Any:
        run = _RUN.get()

        def then(r: Any) -> Any:
            return inner(r, execute) if inner is not None else execute(r)

        return then(request) if run is None else run.tool_sync(request, then)

    async def awrap(request: Any, execute: Callable[[Any], Awaitable[Any]]) -> Any:
        run = _RUN.get()

        async def then(r: Any) -> Any:
            return await (ainner(r, execute) if ainner is not None else execute(r))

        return await (then(request) if run is None else run.tool(request, then))

    sync_only = inner is not None and ainner is None  # as the node ran it: on the loop
    return ToolNode(
        list(node.tools_by_name.values()),
        name=node.name or "tools",
        tags=list(node.tags) if node.tags else None,
        handle_tool_errors=_setting(node, "_handle_tool_errors"),
        messages_key=_setting(node, "_messages_key"),
        wrap_tool_call=wrap,
        awrap_tool_call=None if sync_only else awrap,
    )


def _setting(node: ToolNode, name: str) -> Any:
    """A `ToolNode` setting the copy keeps (LangGraph keeps them as attributes only)."""
    try:
        return getattr(node, name)
    except AttributeError:
        raise TypeError(
            f"this release of LangGraph's `ToolNode` keeps no `{name}`, which a thena_nb step "
            "reads to hold its tools; install a supported release (see thena_nb.frameworks)"
        ) from None


def asked_tools(graph: Pregel[Any, Any, Any, Any]) -> frozenset[str]:
    """The tools of the `ToolNode`s the graph was compiled to interrupt before: their calls
    are thena_nb gated calls (a person decides them in the turn)."""
    before = graph.interrupt_before_nodes
    names: set[str] = set()
    for name, node in graph.nodes.items():
        if isinstance(node.bound, ToolNode) and (before == "*" or name in before):
            names.update(node.bound.tools_by_name)
    return frozenset(names)


def _tool_message(result: Any, call_id: str) -> ToolMessage | None:
    """The `ToolMessage` answering `call_id` in what a `ToolNode` call gave (a message, a
    `Command` whose update holds it, or a list of those)."""
    if isinstance(result, ToolMessage):
        return result if result.tool_call_id == call_id else None
    update = getattr(result, "update", None)
    if isinstance(update, Mapping):
        return _tool_message(list(update.get("messages") or ()), call_id)
    if isinstance(result, list | tuple):
        for item in result:
            found = _tool_message(item, call_id)
            if found is not None:
                return found
    return None


class ToolFailed(Exception):
    """A call its `ToolNode` answered with an error message, without an exception."""


# -- one run of the graph ----------------------------------------------------------------------


class _Run:
    """One run of the step's graph: the graph in a task of its own, its questions answered
    in the step's task (`drive`)."""

    def __init__(self, step: HeldStep, port: TurnPort) -> None:
        self.step = step
        self.port = port
        self.loop = asyncio.get_running_loop()
        self.thread = threading.get_ident()
        self.inbox: asyncio.Queue[_Call] = asyncio.Queue()
        self.watch = _Watch(self)
        self.task: asyncio.Task[Any] | None = None
        self.left: list[asyncio.Task[Any]] = []
        """Graph runs a restart left (`restart`)."""
        self.pending: set[_Call] = set()
        self.active: _Call | None = None
        self.tools_running = 0
        self.turns = 0
        self._folded: list[BaseMessage] = []
        self._hash = blake()

    # -- the step's side ---------------------------------------------------------------------

    async def drive(self) -> Any:
        """Run the graph over the run's history; its output is the step's."""
        _install()
        try:
            self._put_back_inserts()
            self.start()
            state = await self._answer_until_done()
        finally:
            await self._end()
            _uninstall()
        if isinstance(state, Mapping) and state.get("__interrupt__"):
            raise ValueError(
                f"{self.step.framework} step {self.step.name!r} stopped at a LangGraph "
                "`interrupt()`, which a thena_nb step cannot answer: hold tool calls with "
                f"thena_nb's gates instead (`Workflow.of(graph, gate=[...])`); {SUPPORTED}"
            )
        if isinstance(state, Mapping):
            self.report_answers(state.get("messages") or ())
        if self.turns == 0:
            raise ValueError(
                f"{self.step.framework} step {self.step.name!r} ran without a chat model "
                f"call the step could reach; {SUPPORTED}"
            )
        return output_of(state)

    def start(self) -> None:
        """Run the graph from its start over the run's history, in a task of its own."""
        messages = to_langchain(self.port.history, self.step.name)
        deps = self.port.deps
        extra = {} if deps is None else {"context": deps}
        context = contextvars.copy_context()
        context.run(_RUN.set, self)
        coroutine = self.step.held.ainvoke(
            {"messages": messages}, {"callbacks": [self.watch]}, **extra
        )
        self.task = self.loop.create_task(coroutine, context=context)

    async def _answer_until_done(self) -> Any:
        while True:
            task = self.task
            assert task is not None
            asked = asyncio.ensure_future(self.inbox.get())
            await asyncio.wait({asked, task}, return_when=asyncio.FIRST_COMPLETED)
            if asked.done():
                await self.serve(asked.result())
                continue
            asked.cancel()
            if task is self.task:
                return task.result()

    async def serve(self, call: _Call) -> None:
        """A chat model call of the graph as a turn: served, or answered by the model."""
        port = self.port
        self.report_answers(call.messages)
        await port.close()  # the previous turn's tools are done
        if self._put_back_inserts():
            self.restart(call)
            return
        asked = self.request_of(call)
        try:
            reply, proposed, _ = await port.model_call(asked)
        except BaseException:
            self.abandon(call)
            raise
        self.turns += 1
        self.pending.discard(call)
        if call.went_live:
            _settle(call.settled)
        else:
            generation = ChatGeneration(message=message_of(reply, proposed, asked.model))
            _settle(call.answer, [generation])

    def request_of(self, call: _Call) -> ForeignRequest:
        """What the graph is about to send its chat model, as thena_nb sees it."""
        params = call.params
        specs = specs_of(params.get("tools"))
        model = params.get("model") or params.get("model_name")
        model = model or call.metadata.get("ls_model_name") or self.step.model.name
        limit = params.get("max_tokens") or params.get("max_completion_tokens") or 0
        return ForeignRequest(
            system=system_of(call.messages),
            tools=specs,
            canonical=(
                self._said(call.messages),
                stable({k: v for k, v in params.items() if k != "tools"}),
            ),
            live=lambda: self.live(call),
            model=str(model),
            max_tokens=limit if isinstance(limit, int) else 0,
            held=frozenset(s.name for s in specs) & self.step.asks,
        )

    def _said(self, messages: Sequence[BaseMessage]) -> str:
        """The digest of the messages' `canonical` forms, folding in only those new since
        the last request when it starts with the same message objects."""
        folded = self._folded
        n = len(folded)
        if len(messages) < n or any(messages[i] is not folded[i] for i in range(n)):
            self._folded, self._hash, n = [], blake(), 0
            folded = self._folded
        for message in messages[n:]:
            self._hash.update(repr(canonical(message)).encode())
            folded.append(message)
        return str(self._hash.hexdigest())

    async def live(self, call: _Call) -> Reply:
        """The turn goes live: LangChain calls its model; its answer comes back through the
        cache's `update` (or its error through the callbacks)."""
        if call.went_live or call.answer is None or call.reply is None:
            raise RuntimeError("a LangChain model call is made once per turn; it cannot retry")
        call.went_live = True
        _settle(call.answer, None)
        task = self.task
        assert task is not None
        await asyncio.wait({call.reply, task}, return_when=asyncio.FIRST_COMPLETED)
        if call.reply.done():
            return call.reply.result()
        raise task.exception() or RuntimeError("the graph ended before its chat model answered")

    def report_answers(self, messages: Sequence[BaseMessage]) -> None:
        """The open turn's calls that the graph answered without a held tool (a structured
        output, a node of its own): reported from the `ToolMessage`s after its answer."""
        for message in reversed(messages):
            if isinstance(message, AIMessage):
                return
            if isinstance(message, ToolMessage):
                got = self.port.before_tool(message.tool_call_id)
                if isinstance(got, ToolCall):
                    self.report(message.tool_call_id, message, None)

    def report(self, call_id: str, result: Any, error: BaseException | None) -> None:
        found = _tool_message(result, call_id)
        if found is None:
            self.port.after_tool(call_id, result=to_text(result))
            return
        text = text_of(found.content)
        if found.status == "error":
            self.port.after_tool(call_id, error=error or ToolFailed(text), message=text)
        else:
            self.port.after_tool(call_id, result=text)

    def _put_back_inserts(self) -> bool:
        """Put the user messages a fork injects before the next turn into the history now
        (as its request would); whether there were any (the graph must see them)."""
        at = self.port.at
        replay = at.control.replay
        if replay is None or not replay.inserts or not at.top_level:
            return False
        history = at.scope.history
        n = len(history)
        replay.insert_before(len(at.scope.turns), history)
        return len(history) > n

    def restart(self, call: _Call) -> None:
        """The graph runs again from its start over the history as it is now (with the
        messages a fork injected): its next chat model call is this turn's."""
        self.abandon(call)
        if self.task is not None:
            self.task.cancel()
            self.left.append(self.task)
        self.start()

    def abandon(self, call: _Call) -> None:
        """Nothing more answers `call`: the graph's waits on it end (cancelled)."""
        self.pending.discard(call)
        for future in (call.answer, call.settled, call.reply):
            if future is not None and not future.done():
                future.cancel()
        if self.active is call:
            self.active = None

    async def _end(self) -> None:
        for call in list(self.pending):
            self.abandon(call)
        tasks = [t for t in (*self.left, self.task) if t is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        for task in tasks:
            if not task.cancelled():
                task.exception()  # retrieved: the step raised what matters

    # -- the graph's side --------------------------------------------------------------------

    async def lookup(self, call: _Call) -> list[ChatGeneration] | None:
        """The cache's lookup for `call`: the served answer, or `None` to call the model."""
        call.looked_up = True
        if self.active is not None or self.tools_running:
            raise ValueError(
                f"{self.step.framework} step {self.step.name!r}: the graph called a chat "
                "model while another call or a tool was running; " + SUPPORTED
            )
        self.active = call
        loop = self.loop
        call.answer, call.reply, call.settled = (loop.create_future() for _ in range(3))
        self.pending.add(call)
        self.inbox.put_nowait(call)
        try:
            return await call.answer
        finally:
            if not call.went_live and self.active is call:
                self.active = None

    async def update(self, call: _Call, generations: Sequence[Any]) -> None:
        """The model's own answer for `call`: to the turn, then wait for its gates."""
        call.finished = True
        try:
            message = generations[0].message
            _settle(call.reply, reply_of(message))
            assert call.settled is not None
            await call.settled
        finally:
            if self.active is call:
                self.active = None

    async def tool(self, request: Any, then: Callable[[Any], Awaitable[Any]]) -> Any:
        """A `ToolNode` call: served, or run (with a gate's arguments) and reported."""
        begun, running = self._tool_begins(request)
        if running is None:
            return begun if isinstance(begun, ToolMessage) else await then(begun)
        token = _IN_TOOL.set(running)
        try:
            result = await then(begun)
        except BaseException as exc:
            self._tool_ends(running, error=exc)
            raise
        finally:
            _IN_TOOL.reset(token)
        self._tool_ends(running, result=result)
        return result

    def tool_sync(self, request: Any, then: Callable[[Any], Any]) -> Any:
        """`tool` for a `ToolNode` whose own wrapper is synchronous (it runs on the loop)."""
        if threading.get_ident() != self.thread:
            raise RuntimeError(f"{self.step.framework} step: a held tool ran off its loop")
        begun, running = self._tool_begins(request)
        if running is None:
            return begun if isinstance(begun, ToolMessage) else then(begun)
        token = _IN_TOOL.set(running)
        try:
            result = then(begun)
        except BaseException as exc:
            self._tool_ends(running, error=exc)
            raise
        finally:
            _IN_TOOL.reset(token)
        self._tool_ends(running, result=result)
        return result

    def _tool_begins(self, request: Any) -> tuple[Any, _ToolRun | None]:
        call = request.tool_call
        call_id = call.get("id")
        got = self.port.before_tool(call_id) if call_id else None
        if got is None:
            return request, None
        if isinstance(got, Serve):
            status = "success" if got.ok else "error"
            served = ToolMessage(got.text, tool_call_id=call_id, name=call["name"], status=status)
            return served, None
        if got.decision == "edit":
            request = request.override(tool_call={**call, "args": dict(got.arguments)})
        self.tools_running += 1
        return request, _ToolRun(call_id)

    def _tool_ends(
        self, running: _ToolRun, *, result: Any = None, error: BaseException | None = None
    ) -> None:
        self.tools_running -= 1
        if error is None:
            self.report(running.call_id, result, running.error)
        elif isinstance(error, Exception) and not isinstance(error, GraphBubbleUp):
            self.port.after_tool(running.call_id, error=error)

    # -- threads -----------------------------------------------------------------------------

    def from_thread(self, coroutine: Any) -> Any:
        """Run `coroutine` on the step's loop from a node's worker thread, and wait."""
        if threading.get_ident() == self.thread:
            coroutine.close()
            raise RuntimeError(
                f"{self.step.framework} step {self.step.name!r}: a chat model was called "
                "synchronously on the event loop (`invoke` inside an `async def` node); "
                "use `ainvoke` there"
            )
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def on_loop(self, fn: Callable[[], Any]) -> None:
        if threading.get_ident() == self.thread:
            fn()
        else:
            self.loop.call_soon_threadsafe(fn)


async def run_graph(step: HeldStep, port: TurnPort) -> Any:
    """Run `step`'s graph once as the step: every chat model call a turn."""
    return await _Run(step, port).drive()
