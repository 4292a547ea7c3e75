"""The report tree of a run: one node per step that ran, loop nodes with their stop reasons."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from thena_nb.core.records.types import LoopFailure, LoopStopReason, blank, construct, shares_keys

__all__ = ["ReportNode", "ReportNodeKind", "new_node"]

ReportNodeKind = Literal["workflow", "agent", "function", "parallel", "loop"]


@shares_keys
class ReportNode(BaseModel):
    """One step of a run as it happened; `run.report` is the root.

    A loop's children repeat once per iteration, in order; agent nodes point at their turns
    by index into `run.turns`.
    """

    # `inf` (a loop's `max_fails` when off) is written as JSON's `Infinity`, as `json.dumps`
    # writes it, and read back as `inf`.
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants", defer_build=True)

    kind: ReportNodeKind
    name: str
    """Workflow or agent name, function name, `"parallel"` or `"loop"`."""
    path: str
    """The step path, e.g. `"review/1.loop/0.ExecutorAgent"`."""
    children: list[ReportNode] = Field(default_factory=list)
    turns: list[int] = Field(default_factory=list)
    """Agent nodes: indexes into `run.turns`."""
    iteration: int | None = None
    """Children of a loop: the 1-based iteration they ran in."""
    branch: int | None = None
    """Children of a parallel block: their 0-based position."""
    stop_reason: LoopStopReason | None = None
    """Loop nodes: why the loop stopped; `None` while running or when an error ended it."""
    iterations: int = 0
    """Loop nodes: iterations run (those in which at least one step ran)."""
    max_iterations: int | None = None
    """Loop nodes: the loop's `max_iterations`."""
    max_fails: float | None = None
    """Loop nodes: the loop's `max_fails` (`inf` when off)."""
    failures: LoopFailure | None = None
    """Loop nodes: the last failed tool call, if any."""
    error: str | None = None
    """Set on the node where an exception was raised."""

    def walk(self) -> Iterator[ReportNode]:
        """This node and every node below it, in pre-order."""
        yield self
        for child in self.children:
            yield from child.walk()

    def turn_indexes(self) -> list[int]:
        """Indexes of every turn under this node, in run order."""
        return sorted(i for node in self.walk() for i in node.turns)


def new_node(
    kind: ReportNodeKind, name: str, path: str, iteration: int | None = None
) -> ReportNode:
    """A new report node, built without validation (the executor makes one per step run)."""
    values = blank(ReportNode)  # the other fields' defaults are `None`
    values["kind"] = kind
    values["name"] = name
    values["path"] = path
    values["children"] = []
    values["turns"] = []
    values["iteration"] = iteration
    values["iterations"] = 0
    return construct(ReportNode, values)
