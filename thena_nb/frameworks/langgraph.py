"""A compiled LangGraph graph that drives LangChain chat models and tools, as a thena_nb step.

Supported graphs: a graph whose state holds the conversation as `messages`, whose nodes
call LangChain chat models with `invoke`/`ainvoke` (one call at a time), and whose tools run
in a `ToolNode` (`langgraph.prebuilt`), directly or in a compiled graph that is a node of
it. That is an agent from `langchain.agents.create_agent` (its middleware included), and a
hand-built `StateGraph(MessagesState)` whose nodes call a chat model (`bind_tools`) and
route its calls to a `ToolNode`. Each chat model call is one thena_nb turn, with the calls
the `ToolNode` ran. Anything else is refused with an error that says so: a graph without
`messages` (the functional API's `@entrypoint`, say), a graph that calls no chat model the
step can reach (a model with `cache=False` or a cache of its own, a model streamed with
`.astream()` inside a node), two chat model calls at once (parallel branches), a tool run
outside a `ToolNode`, and a LangGraph `interrupt()` (use thena_nb's gates).

The step holds the graph at LangChain's public seams, for each run only, so the user's
graph, models and tools are never changed (`_langgraph_hold.py`):

- its chat models at LangChain's LLM cache (a `BaseCache` installed as the global cache while
  a step runs, which calls of no step pass through to the cache installed before) and a
  callback handler given to the run: each call is a turn (`TurnPort.model_call`). Live, the
  model answers as LangChain calls it and the turn's gates decide its calls before the graph
  goes on; served (replay, a fork's prefix, a resume), the recorded reply is the cache's hit:
  the `AIMessage` the model gave, with its calls' ids, the model's own arguments and its
  token counts, and no model is called.
- its tools at a copy of the graph (`Pregel.copy`) whose `ToolNode`s are rebuilt with one
  more `wrap_tool_call`, outermost: a recorded result, a rejection or a response is the
  `ToolMessage` without running the tool (a failure with `status="error"`); a live call runs
  with the arguments a gate may have edited, and the `ToolMessage` it gave is reported. A
  tool that raises is a failed call: the `ToolNode`'s `handle_tool_errors` decides whether
  the model reads the error (the call is recorded with the exception's traceback) or the
  graph, and so the step, fails (LangGraph's default for errors other than bad arguments).
  As for any `ToolNode` with a wrapper, LangGraph applies `handle_tool_errors` to what the
  wrapper raises too: a node that handles only some exception types (a tuple) makes a
  message of the others as well.
- tools of a `ToolNode` the graph was compiled to interrupt before (`interrupt_before=
  ["tools"]`) are thena_nb gated calls, whatever `gate=` says: the person decides in the turn.

While a step runs, its chat model calls do not consult a global LLM cache the user installed
(the step's replay is their cache); every other call does, as before.

The graph runs without its checkpointer and its compiled interrupts: the run's history is its
input (`{"messages": [...]}`: the step's own turns as its `AIMessage`s and `ToolMessage`s,
the user's and other agents' messages as user text), and each model call's messages join the
run's history, so the steps after it read them. Messages a fork injects
(`run.fork(k, inject=...)`) start the graph again from its start over the history with
them, so state other than `messages` starts afresh there. The step's output is the
graph's `structured_response` (`create_agent(response_format=...)`), else the text of its
last message. `wf.run(..., deps=...)` is the graph's `context`.

The request key covers what the chat model is sent besides thena_nb's history: its messages
as text, calls and results (no message ids, `usage_metadata` or `response_metadata`, which
differ between a live answer and a served one), its bound tools and its other settings.
Only `name` can be changed by `replace` (a fork's or an experiment's `changes`): the chat
model and the prompt are inside the graph's nodes.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import SystemMessage, messages_to_dict
from langgraph.pregel import Pregel

from thena_nb.core.engine.foreign import ForeignAgent, GateSpec, TurnPort, _Live
from thena_nb.core.records.model import ModelRequest
from thena_nb.frameworks._langgraph_convert import to_langchain
from thena_nb.frameworks._langgraph_describe import describe_graph
from thena_nb.frameworks._langgraph_hold import SUPPORTED, asked_tools, held_graph, run_graph

__all__ = ["LangGraphStep", "is_graph"]

_DEFAULT_NAME = "LangGraph"
"""The name LangGraph gives a graph compiled without one."""
_PRICED = {
    "openai": "openai",
    "anthropic": "anthropic",
    "groq": "groq",
    "mistralai": "mistral",
    "deepseek": "deepseek",
    "google_genai": "google",
    "xai": "x-ai",
}
"""LangChain's provider names (`ls_provider`) as thena_nb's pricing knows them."""


def is_graph(obj: Any) -> bool:
    """Whether `obj` is a compiled LangGraph graph (`StateGraph.compile()`, `create_agent`)."""
    return isinstance(obj, Pregel)


class LangGraphStep(ForeignAgent):
    """A compiled LangGraph graph as a step: its whole run, one turn per chat model call.

    Example:
        >>> from langchain.agents import create_agent
        >>> from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        >>> from langchain_core.messages import AIMessage
        >>> from thena_nb import Workflow
        >>> model = GenericFakeChatModel(messages=iter([AIMessage("Sunny.")]))
        >>> wf = Workflow.of(create_agent(model, name="Forecaster"))
        >>> run = wf.run("Weather in Lisbon?", store=False)
        >>> run.output, run.turns[0].agent
        ('Sunny.', 'Forecaster')
    """

    framework = "LangGraph"
    changeable = ("name",)
    """Only the name: the chat model and the prompt are inside the graph's nodes."""

    def __init__(
        self,
        graph: Any,
        *,
        name: str | None = None,
        gate: GateSpec = None,
        overrides: dict[str, Any] | None = None,
    ) -> None:
        overrides = dict(overrides or {})
        _check_shape(graph)
        step_name = self.step_name(graph, name, overrides)
        self.overrides = overrides
        self._description, models = describe_graph(graph)
        super().__init__(step_name, target=graph, model=_model_of(models), gate=gate)
        self.held = held_graph(graph)
        """The copy of the graph the step runs (its `ToolNode`s held)."""
        self.asks = asked_tools(graph)
        """Tools whose calls the graph itself stops for (`interrupt_before`): gated."""

    @classmethod
    def step_name(cls, agent: Any, name: str | None, overrides: dict[str, Any]) -> str:
        """The step's name: a changed one, else the graph's own (not LangGraph's default),
        else `Workflow.of(name=)`.

        Raises:
            ValueError: None of them is given (the message says how to give one).
        """
        own = getattr(agent, "name", None)
        found = overrides.get("name") or (own if own != _DEFAULT_NAME else None) or name
        if not found:
            raise ValueError(
                "this LangGraph graph has no name; give it one (e.g. `create_agent(..., "
                "name='Forecaster')` or `graph.compile(name='Forecaster')`) or pass "
                "`Workflow.of(graph, name='Forecaster')`"
            )
        return str(found)

    async def drive(self, port: TurnPort) -> Any:
        return await run_graph(self, port)

    def wire(self, request: ModelRequest) -> dict[str, Any]:
        """A turn's request as LangChain's own messages (`messages_to_dict`, the system
        prompt first) and the tools bound to the chat model."""
        messages = to_langchain(request.messages, self.name)
        if request.system:
            messages.insert(0, SystemMessage(request.system))
        return {
            "messages": messages_to_dict(messages),
            "tools": [
                {"type": "function", "function": spec.model_dump(mode="json")}
                for spec in request.tools
            ],
        }

    def configuration(self) -> Any:
        return self._description


def _check_shape(graph: Any) -> None:
    """Refuse a graph the step cannot run, saying what it can."""
    if not is_graph(graph):
        raise TypeError(f"expected a compiled LangGraph graph, got {type(graph).__name__}")
    if "messages" not in graph.channels:
        shown = getattr(graph, "name", None) or type(graph).__name__
        raise ValueError(
            f"LangGraph graph {shown!r} has no `messages` in its state, where a thena_nb step "
            f"puts the run's history and reads the answer; {SUPPORTED}"
        )


def _model_of(models: list[BaseChatModel]) -> _Live:
    """The step's model as thena_nb names and prices it: the first chat model found in the
    graph (a `create_agent` agent's own), when one is found."""
    if not models:
        return _Live("", False)
    model = models[0]
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    try:
        provider = model._get_ls_params().get("ls_provider")
    except Exception:
        provider = None
    priced = _PRICED.get(provider) if isinstance(provider, str) else None
    shown = name if isinstance(name, str) and name else type(model).__name__
    return _Live(shown, priced or False)
