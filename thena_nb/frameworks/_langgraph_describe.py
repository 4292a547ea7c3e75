"""What a compiled LangGraph graph is, for experiments' fingerprints, and the chat models
it holds.

A graph's nodes are functions, many of them LangChain's or LangGraph's own (`create_agent`'s
model node closes over the chat model, the system prompt, the tools and the middleware).
Library functions read module-level state (context variables, registries) that has no
stable description, so they are described here by their qualified name and what their
closure holds; the user's own functions, models and tools are left to the fingerprint
(their code, closures and the globals they read).
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableBinding
from langchain_core.tools import BaseTool
from langgraph.prebuilt import ToolNode
from langgraph.pregel import Pregel
from pydantic import BaseModel

__all__ = ["LIBRARIES", "describe_graph"]

LIBRARIES = ("langchain", "langgraph", "langsmith", "pydantic", "typing", "builtins")
"""Top-level packages whose functions are described by name and closure, not by code."""

_DEPTH = 12


class _Walk:
    """One description: the chat models met on the way, and the objects already seen."""

    def __init__(self) -> None:
        self.models: list[BaseChatModel] = []
        self.seen: set[int] = set()

    def value(self, value: Any, depth: int) -> Any:
        if value is None or isinstance(value, bool | int | float | str | bytes):
            return value
        if depth > _DEPTH or id(value) in self.seen:
            return f"<{type(value).__qualname__}>"
        self.seen.add(id(value))
        try:
            return self._composite(value, depth + 1)
        finally:
            self.seen.discard(id(value))

    def _composite(self, value: Any, depth: int) -> Any:
        if isinstance(value, BaseChatModel):
            self.models.append(value)
            return self.record(value, depth)
        if isinstance(value, Pregel):
            return self.graph(value, depth)
        if isinstance(value, ToolNode):
            return self.tool_node(value, depth)
        if isinstance(value, BaseTool):
            functions = (getattr(value, "func", None), getattr(value, "coroutine", None))
            return (self.record(value, depth), functions)
        if isinstance(value, RunnableBinding):
            return ("bound", self.value(value.bound, depth), self.value(value.kwargs, depth))
        if isinstance(value, BaseModel):
            return self.record(value, depth)
        if isinstance(value, Mapping):
            return {str(k): self.value(v, depth) for k, v in value.items()}
        if isinstance(value, list | tuple | set | frozenset):
            items = [self.value(v, depth) for v in value]
            return sorted(items, key=repr) if isinstance(value, set | frozenset) else items
        if isinstance(value, types.FunctionType | types.MethodType):
            return self.function(value, depth)
        if isinstance(value, type):
            return f"class {value.__module__}.{value.__qualname__}"
        return self.other(value, depth)

    def record(self, value: BaseModel, depth: int) -> Any:
        """A pydantic model (a chat model, a tool, a message) by its fields, each described
        here: never dumped to JSON, which would drain a field that holds an iterator (the
        answers of `GenericFakeChatModel`) and fails on one that holds a function. Fields
        excluded from its JSON (a client, say) are left out."""
        cls = type(value)
        shown = {
            name: self.value(getattr(value, name, None), depth)
            for name, spec in sorted(cls.model_fields.items())
            if not spec.exclude
        }
        return (f"{cls.__module__}.{cls.__qualname__}", shown)

    def function(self, fn: Any, depth: int) -> Any:
        inner = getattr(fn, "__func__", fn)
        module = getattr(inner, "__module__", "") or ""
        if module.partition(".")[0] not in LIBRARIES:
            self.models += _models_near(inner)
            return fn  # the user's: its code, closure and globals
        cells = []
        for cell in inner.__closure__ or ():
            try:
                cells.append(self.value(cell.cell_contents, depth))
            except ValueError:  # a cell not filled yet
                cells.append("<empty>")
        return (f"{module}.{inner.__qualname__}", cells)

    def other(self, value: Any, depth: int) -> Any:
        """A library's object (a runnable, a middleware) by its class and its public
        attributes; the user's as the fingerprint sees it."""
        cls = type(value)
        if cls.__module__.partition(".")[0] not in LIBRARIES:
            return value
        attributes = getattr(value, "__dict__", None) or {}
        return (
            f"{cls.__module__}.{cls.__qualname__}",
            {
                k: self.value(v, depth)
                for k, v in sorted(attributes.items())
                if not k.startswith("_") and k != "config"
            },
        )

    def tool_node(self, node: ToolNode, depth: int) -> Any:
        tools = [self.value(t, depth) for _, t in sorted(node.tools_by_name.items())]
        handling = getattr(node, "_handle_tool_errors", None)
        wraps = (getattr(node, "_wrap_tool_call", None), getattr(node, "_awrap_tool_call", None))
        return ("ToolNode", node.name, tools, self.value(handling, depth), self.value(wraps, depth))

    def graph(self, graph: Pregel[Any, Any, Any, Any], depth: int) -> Any:
        nodes = {name: self.value(node.bound, depth) for name, node in graph.nodes.items()}
        builder = getattr(graph, "builder", None)
        edges = sorted(getattr(builder, "edges", ()) or ())
        branches = {
            source: {name: self.value(spec.path, depth) for name, spec in found.items()}
            for source, found in (getattr(builder, "branches", None) or {}).items()
        }
        stops = (list(graph.interrupt_before_nodes), list(graph.interrupt_after_nodes))
        return ("graph", graph.name, nodes, edges, branches, stops)


def _models_near(fn: Any) -> list[BaseChatModel]:
    """The chat models a user's function holds in its closure or reads as globals (a node
    that calls `llm.invoke(...)`), bound or not."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    values = []
    for cell in fn.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:
            continue
    scope = getattr(fn, "__globals__", {})
    values += [scope[name] for name in code.co_names if name in scope]
    found = []
    for value in values:
        while isinstance(value, RunnableBinding):
            value = value.bound
        if isinstance(value, BaseChatModel):
            found.append(value)
    return found


def describe_graph(graph: Pregel[Any, Any, Any, Any]) -> tuple[Any, list[BaseChatModel]]:
    """The graph's description for fingerprints, and the chat models found in it (in the
    order met: a `create_agent` graph's model first). A graph it cannot read is described
    by a value without a stable description, so experiments never reuse its runs."""
    walk = _Walk()
    try:
        return walk.value(graph, 0), walk.models
    except Exception:  # a graph this walk cannot read: its runs are never reused
        return object(), walk.models
