"""`Agent`: a model, a system prompt and tools. As a step it takes exactly one turn — one
model call, then every tool call it made, in order (S27); the turn itself is `_turn.py`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from thena_nb.core.parts.history import HistoryProcessor
from thena_nb.core.parts.tools import Tool, ToolSource, tool
from thena_nb.core.records._keys import blake
from thena_nb.core.records.model import Model, ToolSpec

__all__ = ["Agent"]


class Agent:
    """An LLM agent: a model, a system prompt and tools. As a step it takes one turn.

    Args:
        name: Unique within its workflow; used in step paths and to attribute its messages.
        model: Any `Model` (`ScriptedModel`, `AnthropicModel`, ...).
        system: The system prompt.
        tools: `@tool` functions (plain functions are wrapped with `@tool`), and tool sources
            (`thena_nb.mcp.stdio(...)`, any `ToolSource`), whose tools are listed once per run
            when the agent's first live model call needs them and come after its own tools.
        output_field: Also write the turn's text to this field of the workflow state.
        rescue: Look for tool calls written as text when the model made no native call.
        max_tokens: The model's output limit per turn.
        history: A history processor, e.g. `keep_first_and_recent(20)`.
        parallel_tools: Run one turn's tool calls concurrently (results still go back in
            call order).

    Example:
        >>> from thena_nb import Agent, tool
        >>> from thena_nb.models import ScriptedModel, reply
        >>> @tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two numbers.'''
        ...     return a + b
        >>> calc = Agent("Calc", model=ScriptedModel([reply.tool("add", a=1, b=2), "3"]),
        ...              tools=[add])
        >>> calc
        Agent('Calc', model='scripted', tools=['add'])
    """

    kind = "agent"

    def __init__(
        self,
        name: str,
        *,
        model: Model,
        system: str = "",
        tools: Iterable[Tool | ToolSource | Callable[..., Any]] = (),
        output_field: str | None = None,
        rescue: bool = True,
        max_tokens: int = 1024,
        history: HistoryProcessor | None = None,
        parallel_tools: bool = False,
    ) -> None:
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"agent name must be a non-empty string without '/', got {name!r}")
        self.name = name
        self.model = model
        self.system = system
        self.tools: list[Tool] = []
        self.sources: list[ToolSource] = []
        for t in tools:
            if isinstance(t, Tool):
                self.tools.append(t)
            elif isinstance(t, ToolSource):
                self.sources.append(t)
            else:
                self.tools.append(tool(t))
        names = [t.name for t in self.tools]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"agent {name!r} has two tools named {dupes[0]!r}; rename one")
        self.output_field = output_field
        self.rescue = rescue
        self.max_tokens = max_tokens
        self.history = history
        self.parallel_tools = parallel_tools
        self._by_name = {t.name: t for t in self.tools}
        self._specs: list[ToolSpec] = [t.spec for t in self.tools]
        self._gated = any(t.gate for t in self.tools)
        """Some tool holds calls for a decision (engine/gates.py); else the turn skips gates."""
        self._key: str | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name != "_key":
            object.__setattr__(self, "_key", None)  # a changed agent asks something new

    @property
    def key(self) -> str:
        """A fingerprint of what the agent sends besides the history: its name, model name,
        system prompt, output limit, tools (a tool source by its `key`, not by its tools) and
        history processor (part of each request key).
        """
        if self._key is None:
            h = blake()
            model = self.model
            h.update(repr((self.name, getattr(model, "name", type(model).__name__))).encode())
            h.update(self.system.encode())
            h.update(repr(self.max_tokens).encode())
            for spec in self._specs:
                h.update(spec.model_dump_json().encode())
            for source in self.sources:  # what a source's tools will be, before it is opened
                h.update(f"source {source.key}".encode())
            h.update(repr(getattr(self.history, "__name__", self.history)).encode())
            self._key = h.hexdigest()
        return self._key

    def replace(self, **changes: Any) -> Agent:
        """A copy of this agent with some fields replaced (used by fork and experiments).

        Example:
            >>> from thena_nb import Agent
            >>> from thena_nb.models import ScriptedModel
            >>> agent = Agent("Executor", model=ScriptedModel(["ok"]), system="Be thorough.")
            >>> agent.replace(system="Be brief.").system
            'Be brief.'
        """
        fields = dict(
            model=self.model,
            system=self.system,
            tools=[*self.tools, *self.sources],
            output_field=self.output_field,
            rescue=self.rescue,
            max_tokens=self.max_tokens,
            history=self.history,
            parallel_tools=self.parallel_tools,
        )
        unknown = set(changes) - set(fields) - {"name"}
        if unknown:
            raise ValueError(
                f"agent {self.name!r} has no field {sorted(unknown)[0]!r}; "
                f"changeable fields: {', '.join(sorted(fields))}"
            )
        fields.update(changes)
        name = changes.pop("name", self.name)
        fields.pop("name", None)
        return Agent(name, **fields)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        parts = [
            repr(self.name),
            f"model={getattr(self.model, 'name', type(self.model).__name__)!r}",
        ]
        if self.tools:
            parts.append(f"tools={[t.name for t in self.tools]!r}")
        if self.sources:
            parts.append(f"sources={self.sources!r}")
        return f"Agent({', '.join(parts)})"
