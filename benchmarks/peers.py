"""W1 on peer frameworks: the same tool loop on pydantic-ai, LangGraph, smolagents and the
OpenAI Agents SDK, each called the way its own docs show.

Each peer gets an offline model that asks for `add(a=i, b=1)` N-1 times, then answers, and a
tool `add`; both count their calls, and every run is checked to have made exactly N model
calls and N-1 tool calls (against the framework's own tally too, where it keeps one). Each
peer runs its fastest documented set-up: async where it has async (an `async def` tool, so no
worker thread per call), nothing printed, no tracing.

- pydantic-ai: `Agent(FunctionModel(fn), tools=[add])`, `await agent.run(...)` with no
  request limit.
- LangGraph: `langchain.agents.create_agent` (the graph LangGraph's docs now build; the
  `create_react_agent` prebuilt is deprecated) over a small `BaseChatModel` subclass whose
  `bind_tools` returns itself, `await agent.ainvoke(...)`.
- smolagents: `ToolCallingAgent` over a `Model` subclass, `agent.run(task)` (its docs' call;
  `return_full_result=True` would add a full-result object and is not used); its answer is the
  `final_answer` tool call (the framework's way to answer), not counted as one of the N-1 calls.
- OpenAI Agents SDK: `Agent(model=...)` over a `Model` subclass (the SDK's interface for other
  models), `await Runner.run(agent, task, max_turns=n)` with tracing off in `RunConfig` (no
  OpenAI key to export traces with).

A peer whose package is not installed is reported as absent (`pip install -e ".[bench]"`).
The peers are imported through `importlib`, so this module type-checks without them.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

__all__ = ["PEERS", "Peer", "Runner"]

Runner = Callable[[], Awaitable[tuple[int, int]]]
"""One full run of the loop; returns the (model calls, tool calls) it made, verified."""


@dataclass(frozen=True)
class Peer:
    """A peer framework: what it needs installed and how to build its tool loop."""

    name: str
    modules: tuple[str, ...]
    """Import names that must be present."""
    distributions: tuple[str, ...]
    """Package names to install (and whose versions are reported)."""
    build: Callable[[int], Runner]
    """`build(n)` returns a runner for the N-turn loop."""

    def missing(self) -> list[str]:
        """The import names of this peer that are not installed."""
        return [m for m in self.modules if not _importable(m)]

    def versions(self) -> dict[str, str]:
        """Installed versions of the peer's packages."""
        out = {}
        for dist in self.distributions:
            try:
                out[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                out[dist] = "absent"
        return out


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError, AttributeError):  # e.g. blocked in sys.modules
        return False


class _Counter:
    """Model and tool calls of one run."""

    __slots__ = ("model", "tool")

    def __init__(self) -> None:
        self.model = 0
        self.tool = 0

    def reset(self) -> None:
        self.model = 0
        self.tool = 0


def _verify(name: str, n: int, counted: tuple[int, int], own: tuple[int, int] | None) -> None:
    expected = (n, n - 1)
    if counted != expected:
        raise AssertionError(
            f"{name}: expected {expected[0]} model calls and {expected[1]} tool calls, "
            f"counted {counted[0]} and {counted[1]}"
        )
    if own is not None and own != expected:
        raise AssertionError(f"{name}: the framework's own tally is {own}, expected {expected}")


def _pydantic_ai(n: int) -> Runner:
    agent_mod: Any = importlib.import_module("pydantic_ai")
    messages: Any = importlib.import_module("pydantic_ai.messages")
    function: Any = importlib.import_module("pydantic_ai.models.function")
    usage_mod: Any = importlib.import_module("pydantic_ai.usage")
    count = _Counter()

    def model_fn(_messages: list[Any], _info: Any) -> Any:
        i = count.model
        count.model += 1
        if i < n - 1:
            call = messages.ToolCallPart("add", {"a": i, "b": 1}, tool_call_id=f"call-{i}")
            return messages.ModelResponse(parts=[call])
        return messages.ModelResponse(parts=[messages.TextPart("done")])

    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        count.tool += 1
        return a + b

    agent = agent_mod.Agent(function.FunctionModel(model_fn), tools=[add])
    limits = usage_mod.UsageLimits(request_limit=None)

    async def run() -> tuple[int, int]:
        count.reset()
        result = await agent.run("go", usage_limits=limits)
        assert result.output == "done", result.output
        usage = result.usage
        if not hasattr(usage, "requests"):  # older releases: a method
            usage = usage()
        counted = (count.model, count.tool)
        _verify("pydantic-ai", n, counted, (usage.requests, usage.tool_calls))
        return counted

    return run


def _langgraph(n: int) -> Runner:
    chat_models: Any = importlib.import_module("langchain_core.language_models.chat_models")
    lc_messages: Any = importlib.import_module("langchain_core.messages")
    outputs: Any = importlib.import_module("langchain_core.outputs")
    lc_tools: Any = importlib.import_module("langchain_core.tools")
    lc_agents: Any = importlib.import_module("langchain.agents")
    count = _Counter()

    def next_result() -> Any:
        i = count.model
        count.model += 1
        if i < n - 1:
            call = {"name": "add", "args": {"a": i, "b": 1}, "id": f"call-{i}", "type": "tool_call"}
            message = lc_messages.AIMessage(content="", tool_calls=[call])
        else:
            message = lc_messages.AIMessage(content="done")
        return outputs.ChatResult(generations=[outputs.ChatGeneration(message=message)])

    class ScriptedChat(chat_models.BaseChatModel):  # type: ignore[misc]
        """Asks for `add` n-1 times, then answers; binding tools changes nothing."""

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def _generate(
            self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> Any:
            return next_result()

        async def _agenerate(
            self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> Any:
            return next_result()

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        count.tool += 1
        return a + b

    # LangGraph's docs build the agent with LangChain's `create_agent` (a LangGraph graph);
    # `langgraph.prebuilt.create_react_agent` is deprecated in its favour.
    graph = lc_agents.create_agent(ScriptedChat(), tools=[lc_tools.tool(add)])
    config = {"recursion_limit": 2 * n + 10}

    async def run() -> tuple[int, int]:
        count.reset()
        out = await graph.ainvoke({"messages": [{"role": "user", "content": "go"}]}, config)
        history = out["messages"]
        assert history[-1].content == "done", history[-1]
        tool_messages = sum(1 for m in history if m.type == "tool")
        ai_messages = sum(1 for m in history if m.type == "ai")
        counted = (count.model, count.tool)
        _verify("LangGraph", n, counted, (ai_messages, tool_messages))
        return counted

    return run


def _smolagents(n: int) -> Runner:
    smol: Any = importlib.import_module("smolagents")
    models: Any = importlib.import_module("smolagents.models")
    monitoring: Any = importlib.import_module("smolagents.monitoring")
    count = _Counter()

    class ScriptedModel(smol.Model):  # type: ignore[misc]
        """Asks for `add` n-1 times, then calls `final_answer`."""

        def generate(
            self,
            messages: Any,
            stop_sequences: Any = None,
            response_format: Any = None,
            tools_to_call_from: Any = None,
            **kwargs: Any,
        ) -> Any:
            i = count.model
            count.model += 1
            arguments: dict[str, Any]
            if i < n - 1:
                name, arguments = "add", {"a": i, "b": 1}
            else:
                name, arguments = "final_answer", {"answer": "done"}
            function = models.ChatMessageToolCallFunction(name=name, arguments=arguments)
            call = models.ChatMessageToolCall(id=f"call-{i}", type="function", function=function)
            return models.ChatMessage(
                role=models.MessageRole.ASSISTANT, content="", tool_calls=[call]
            )

    def add(a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: The first number.
            b: The second number.
        """
        count.tool += 1
        return a + b

    agent = smol.ToolCallingAgent(
        tools=[smol.tool(add)],
        model=ScriptedModel(model_id="scripted"),
        max_steps=n,
        verbosity_level=monitoring.LogLevel.OFF,
    )

    async def run() -> tuple[int, int]:
        count.reset()
        result = agent.run("go")  # as smolagents' docs call it: the answer, not a RunResult
        assert result == "done", result
        steps = sum(1 for s in agent.memory.steps if type(s).__name__ == "ActionStep")
        counted = (count.model, count.tool)
        _verify("smolagents", n, counted, (steps, steps - 1))
        return counted

    return run


def _openai_agents(n: int) -> Runner:
    agents: Any = importlib.import_module("agents")
    responses: Any = importlib.import_module("openai.types.responses")
    count = _Counter()

    class ScriptedModel(agents.Model):  # type: ignore[misc]
        """Asks for `add` n-1 times, then answers with a message (the SDK's custom `Model`)."""

        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            i = count.model
            count.model += 1
            item: Any
            if i < n - 1:
                item = responses.ResponseFunctionToolCall(
                    type="function_call",
                    name="add",
                    arguments=f'{{"a": {i}, "b": 1}}',
                    call_id=f"call-{i}",
                )
            else:
                text = responses.ResponseOutputText(type="output_text", text="done", annotations=[])
                item = responses.ResponseOutputMessage(
                    id=f"msg-{i}",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[text],
                )
            return agents.ModelResponse(output=[item], usage=agents.Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the benchmark does not stream")

    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        count.tool += 1
        return a + b

    agent = agents.Agent(name="Calc", model=ScriptedModel(), tools=[agents.function_tool(add)])
    config = agents.RunConfig(tracing_disabled=True)  # no OpenAI key: no trace export

    async def run() -> tuple[int, int]:
        count.reset()
        result = await agents.Runner.run(agent, "go", max_turns=n, run_config=config)
        assert result.final_output == "done", result.final_output
        outputs = sum(1 for item in result.new_items if type(item).__name__ == "ToolCallOutputItem")
        counted = (count.model, count.tool)
        _verify("OpenAI Agents SDK", n, counted, (len(result.raw_responses), outputs))
        return counted

    return run


PEERS: list[Peer] = [
    Peer(
        "pydantic-ai",
        modules=("pydantic_ai",),
        distributions=("pydantic-ai-slim",),
        build=_pydantic_ai,
    ),
    Peer(
        "LangGraph",
        modules=("langgraph", "langchain_core", "langchain"),
        distributions=("langgraph", "langchain-core", "langchain"),
        build=_langgraph,
    ),
    Peer(
        "smolagents",
        modules=("smolagents",),
        distributions=("smolagents",),
        build=_smolagents,
    ),
    Peer(
        "OpenAI Agents SDK",
        modules=("agents",),
        distributions=("openai-agents",),
        build=_openai_agents,
    ),
]
"""The peers W1 compares against, in table order."""
