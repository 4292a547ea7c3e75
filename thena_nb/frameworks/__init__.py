"""Agents of other frameworks as thena_nb steps: `step_of(agent)`.

`Workflow.of(agent)`, `Workflow(name, [...])`, `parallel` and `loop` take a framework's agent
where they take a thena_nb `Agent`; this package makes it a `ForeignAgent` (core/engine/foreign.py).
Each framework has a module here, imported only when one of its agents is used:

| framework | its agent | module | extra |
|---|---|---|---|
| pydantic-ai | `pydantic_ai.Agent` | `pydantic_ai.py` | `thena_nb[pydantic-ai]` |
| OpenAI Agents SDK | `agents.Agent` | `openai_agents.py` | `thena_nb[openai-agents]` |
| LangGraph | a compiled graph (`create_agent`) | `langgraph.py` | `thena_nb[langgraph]` |
| smolagents | `ToolCallingAgent`, `CodeAgent` | `smolagents.py` | `thena_nb[smolagents]` |

A new framework adds a row: a `ForeignAgent` subclass that holds the framework at its model
call and its tool calls and reports both to the `TurnPort` (see core/engine/foreign.py).
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from thena_nb.core.engine.foreign import KINDS, ForeignAgent, GateSpec

__all__ = ["KINDS", "SUPPORTED", "step_of"]

SUPPORTED: dict[str, tuple[str, tuple[int, int], tuple[int, int]]] = {
    "pydantic_ai": ("pydantic-ai-slim", (2, 40), (3, 0)),
    "agents": ("openai-agents", (0, 20), (1, 0)),
    "langgraph": ("langgraph", (1, 0), (2, 0)),
    "smolagents": ("smolagents", (1, 20), (2, 0)),
}
"""By the framework's top-level module: its distribution, the lowest release supported and
the first one that is not (major, minor)."""


def step_of(agent: Any, *, name: str | None = None, gate: GateSpec = None) -> ForeignAgent | None:
    """`agent` as a step when it is an agent of a framework thena_nb holds, else `None`.

    Args:
        agent: The framework's agent.
        name: The step's name when the agent has none.
        gate: Which tools' calls wait for a `Decision`: `True`, tool names, or
            `fn(call) -> bool`.

    Raises:
        ImportError: The framework's release is outside the supported range (the message
            says which).
    """
    root = type(agent).__module__.partition(".")[0]
    if root not in SUPPORTED:
        return None
    if root == "pydantic_ai":
        from thena_nb.frameworks import pydantic_ai

        if pydantic_ai.is_agent(agent):
            _check_release(root)
            return pydantic_ai.PydanticAIStep(agent, name=name, gate=gate)
    elif root == "agents":
        from thena_nb.frameworks import openai_agents

        if openai_agents.is_agent(agent):
            _check_release(root)
            return openai_agents.AgentsSDKStep(agent, name=name, gate=gate)
    elif root == "langgraph":
        from thena_nb.frameworks import langgraph

        if langgraph.is_graph(agent):
            _check_release(root)
            return langgraph.LangGraphStep(agent, name=name, gate=gate)
    elif root == "smolagents":
        from thena_nb.frameworks import smolagents

        if smolagents.is_agent(agent):
            _check_release(root)
            return smolagents.SmolagentsStep(agent, name=name, gate=gate)
    return None


def _check_release(root: str) -> None:
    dist, low, high = SUPPORTED[root]
    version = metadata.version(dist)
    got = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    if not low <= got < high:
        raise ImportError(
            f"thena_nb supports {dist} from {low[0]}.{low[1]} up to (not including) "
            f"{high[0]}.{high[1]}; {version} is installed. Install a supported release, e.g. "
            f"`pip install '{dist}>={low[0]}.{low[1]},<{high[0]}.{high[1]}'`"
        )
