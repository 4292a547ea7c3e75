"""`record(agent)`: the runs of a framework's agent that the caller makes itself, as `Run`s.

For an app or a test that calls `agent.run(...)` itself: inside the block every run of the
agent is watched (the call is the caller's, unchanged), and when the block ends each becomes
an ordinary thena_nb `Run`: one turn per model call, stored, `frame()`, `to_html`, `diff` and
scorers as any run.

| framework | what is held for the block | module |
|---|---|---|
| pydantic-ai `Agent` | its model, through `agent.override(model=...)` | `_record_pydantic_ai` |
| OpenAI Agents SDK `Agent` | its hooks and model (and its handoffs') | `_record_openai_agents` |
| a compiled LangGraph graph | LangChain callbacks every call inherits | `_record_langgraph` |
| smolagents agent | its model, step callbacks, tool calls or code runs | `_record_smolagents` |
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Literal

from thena_nb.core.engine._aio import run_sync
from thena_nb.core.parts.agent import Agent
from thena_nb.core.runs.run import Run
from thena_nb.core.store.base import RunRecorder
from thena_nb.frameworks._record_base import Hook, build

__all__ = ["RECORDS", "Recording", "record"]

RECORDS = (
    "a pydantic-ai `Agent` or a compiled LangGraph graph (`StateGraph.compile()`, "
    "`create_agent`), an OpenAI Agents SDK `Agent`, or a smolagents `ToolCallingAgent` or "
    "`CodeAgent`"
)
"""What `record` takes, as its error says."""


def _roots(agent: Any) -> set[str]:
    """The top-level packages of the agent's classes (its own class may be the user's)."""
    return {cls.__module__.partition(".")[0] for cls in type(agent).__mro__}


def _hook_of(agent: Any, name: str | None) -> Hook:
    roots = _roots(agent)
    if "pydantic_ai" in roots:
        from thena_nb.frameworks import pydantic_ai

        if pydantic_ai.is_agent(agent):
            from thena_nb.frameworks._record_pydantic_ai import PydanticAIHook

            return PydanticAIHook(agent, name)
    if "agents" in roots:
        from thena_nb.frameworks import openai_agents

        if openai_agents.is_agent(agent):
            from thena_nb.frameworks._record_openai_agents import OpenAIAgentsHook

            return OpenAIAgentsHook(agent, name)
    if "langgraph" in roots:
        from thena_nb.frameworks._record_langgraph import LangGraphHook, is_graph

        if is_graph(agent):
            return LangGraphHook(agent, name)
    if "smolagents" in roots:
        from thena_nb.frameworks import smolagents

        if smolagents.is_agent(agent):
            from thena_nb.frameworks._record_smolagents import SmolagentsHook

            return SmolagentsHook(agent, name)
    hint = ""
    if isinstance(agent, Agent):
        hint = " (a thena_nb `Agent` is recorded by running it: `Workflow.of(agent).run(...)`)"
    raise TypeError(f"`record` takes {RECORDS}; got {type(agent).__qualname__}{hint}")


class Recording:
    """The runs of one agent made inside a `record(agent)` block (see `record`).

    Attributes:
        runs: One `Run` per run of the agent made inside the block, in the order they
            started; filled when the block ends (empty inside it).
    """

    def __init__(
        self, agent: Any, *, store: RunRecorder | Literal[False] | None, name: str | None
    ) -> None:
        self._hook = _hook_of(agent, name)
        self._store = store
        self._state: Literal["ready", "recording", "done"] = "ready"
        self.runs: list[Run] = []

    @property
    def framework(self) -> str:
        """The agent's framework, as users know it."""
        return self._hook.framework

    @property
    def name(self) -> str:
        """The agent's name: the recorded runs' workflow and step name."""
        return self._hook.name

    def __enter__(self) -> Recording:
        if self._state != "ready":
            raise RuntimeError(
                f"this recording of {self.name!r} was used already; start another with "
                f"`record(agent)`"
            )
        self._state = "recording"
        self._hook.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._state = "done"
        self._hook.stop(exc)
        taken = self._hook.taken()
        if taken:
            self.runs = run_sync(build(self._hook, taken, self._store))

    def __repr__(self) -> str:
        shown = f", runs={len(self.runs)}" if self._state == "done" else f", {self._state}"
        return f"Recording({self.framework} {self.name!r}{shown})"


def record(
    agent: Any, *, store: RunRecorder | Literal[False] | None = None, name: str | None = None
) -> Recording:
    """Record the runs of a framework's agent that the caller makes itself, as `Run`s.

    Use it as a context manager around your own, unchanged calls of the agent. Each run of
    the agent made inside the block (concurrent ones included) becomes a `Run` when the
    block ends: one turn per model call (what the model was sent, its reply, the tool calls
    it made with their results, tokens, model name, errors), its output and status. The
    agent is put back as it was when the block ends, also when it raises.

    `record` only watches: the caller owns the call, so there is no replay, no tool gate
    and no stepping inside the block. To replay a recorded run, run the agent as a step:
    `Workflow.of(agent).run(input, replay=rec.runs[0])` reuses the recorded turns of a
    pydantic-ai agent, an OpenAI Agents SDK agent or a smolagents agent while the requests
    match (a recorded turn is keyed as the step keys the same request; a smolagents
    `CodeAgent`'s replay runs its recorded code again, as the step's does); a LangGraph
    graph's step keys its requests its own way, so there the replay goes live from turn 0
    (`replay_diverged_at == 0`).

    Args:
        agent: A pydantic-ai `Agent`, an OpenAI Agents SDK `Agent` (`Runner.run(agent, ...)`
            and `run_sync`, `run_streamed`), a compiled LangGraph graph, or a smolagents
            `ToolCallingAgent` or `CodeAgent` (`agent.run(...)`).
        store: Where the runs are kept, as `wf.run` takes it: a run store, `False` for
            none, or `None` for the default store (`THENA_NB_STORE`).
        name: The runs' workflow and step name when the agent has none.

    Returns:
        A `Recording`; its `runs` are filled when the block ends.

    Raises:
        TypeError: `agent` is not one of the agents `record` takes (the message lists them).
        ValueError: The agent has no name and `name=` is not given.

    Example:
        >>> from pydantic_ai import Agent as PydanticAgent
        >>> from pydantic_ai.models.test import TestModel
        >>> from thena_nb.frameworks.record import record
        >>> forecaster = PydanticAgent(TestModel(custom_output_text="Sunny."), name="Forecaster")
        >>> with record(forecaster, store=False) as rec:
        ...     result = forecaster.run_sync("Weather in Lisbon?")
        >>> [(run.input, run.output, len(run.turns)) for run in rec.runs]
        [('Weather in Lisbon?', 'Sunny.', 1)]
    """
    return Recording(agent, store=store, name=name)
