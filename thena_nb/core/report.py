"""The report tree of a run: one node per step that ran, loop nodes with their stop reasons."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from thena_nb.core.types import (
    LoopFailure,
    LoopStopReason,
    Message,
    RunStatus,
    Turn,
    TurnInfo,
    Usage,
)

__all__ = ["RUN_FORMAT", "ReportNode", "ReportNodeKind", "Run"]

RUN_FORMAT = 1
"""The version of the JSON a `Run` is written as."""

ReportNodeKind = Literal["workflow", "agent", "function", "parallel", "loop"]


class ReportNode(BaseModel):
    """One step of a run as it happened; `run.report` is the root.

    A loop's children repeat once per iteration, in order; agent nodes point at their turns
    by index into `run.turns`.
    """

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

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


class Run:
    """One run of a workflow: its turns, history, report tree, usage and outcome.

    A `Run` is readable at any moment (`session.result`); it is complete once `status` is
    no longer `"running"`.

    Example:
        >>> from thena_nb import Agent, Workflow
        >>> from thena_nb.models import ScriptedModel
        >>> wf = Workflow("hello", [Agent("Greeter", model=ScriptedModel(["Hello!"]))])
        >>> run = wf.run("hi")
        >>> run.status, run.output, len(run.turns)
        ('finished', 'Hello!', 1)
    """

    def __init__(
        self,
        *,
        workflow_name: str,
        input: str,
        run_id: str | None = None,
        state: Any = None,
    ) -> None:
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.workflow_name = workflow_name
        self.input = input
        self.output: Any = None
        self.state = state
        self.status: RunStatus = "running"
        self.error: str | None = None
        self.history: list[Message] = [Message(role="user", content=input)]
        self.turns: list[Turn] = []
        self.report = ReportNode(kind="workflow", name=workflow_name, path=workflow_name)
        self.usage = Usage()
        self.started_at = datetime.now(UTC)
        self.finished_at: datetime | None = None
        self.replay_diverged_at: int | None = None
        self.states: dict[int, Any] = {}
        """The state after each turn (JSON-ready), when the workflow has state; replay and
        resume restore it."""
        self.workflow: Any = None
        """The `Workflow` that made this run (not serialised)."""

    @property
    def turn_infos(self) -> list[TurnInfo]:
        """The `TurnInfo` of every turn, in order."""
        return [t.info for t in self.turns]

    @property
    def loops(self) -> list[ReportNode]:
        """Every loop node of the report, in pre-order."""
        return [n for n in self.report.walk() if n.kind == "loop"]

    @property
    def stop_reasons(self) -> dict[str, LoopStopReason | None]:
        """Each loop's stop reason, by step path (the last run of each loop wins)."""
        return {n.path: n.stop_reason for n in self.loops}

    def frame(self) -> Any:
        """The turns as a pandas DataFrame, one row per turn (needs pandas)."""
        from thena_nb.notebook.frames import turn_frame

        return turn_frame(self.turns)

    def failure_chart(self) -> Any:
        """A matplotlib Figure of each loop's consecutive-failure streak (needs matplotlib)."""
        from thena_nb.notebook.charts import failure_chart

        return failure_chart(self.turns, self.loops)

    @classmethod
    def load(cls, run_id: str, *, store: Any = None) -> Run:
        """Load a stored run (from the default store unless `store` is given).

        A run loaded from a store has no `workflow`; pass one to `fork`.
        """
        from thena_nb.durable import load_run

        return load_run(run_id, store=store)

    def fork(
        self,
        at: int,
        *,
        changes: Mapping[str, Mapping[str, Any]] | None = None,
        workflow: Any = None,
        store: Any = None,
    ) -> Run:
        """A new run that reuses turns `0..at-1` of this one and runs turn `at` onward live,
        with `changes` applied to the workflow.

        Example:
            >>> from thena_nb import Agent, Workflow, loop, tool, until_answered
            >>> from thena_nb.models import ScriptedModel, reply
            >>> model = ScriptedModel([reply.tool("add", a=1, b=1)] * 3 + ["done"])
            >>> calc = Agent("Calc", model=model, tools=[tool(lambda a, b: a + b, name="add")])
            >>> wf = Workflow("sums", [loop(steps=[calc], until=until_answered)])
            >>> run = wf.run("go", store=False)
            >>> brief = {"Calc": {"model": ScriptedModel(["Two."]), "system": "Be brief."}}
            >>> forked = run.fork(2, changes=brief, store=False)
            >>> [t.replayed for t in forked.turns], forked.output
            ([True, True, False], 'Two.')
        """
        from thena_nb.durable import fork

        return fork(self, at, changes=changes, workflow=workflow, store=store)

    def what_if(self, until: Callable[..., Any]) -> dict[str, Any]:
        """Where each loop would have stopped under another `until`, from the recorded turns
        alone (no model call): `{loop_path: WhatIf(iteration, stop_reason)}`."""
        from thena_nb.durable import what_if

        return what_if(self, until)

    def to_json(self, *, indent: int | None = None) -> str:
        """The run as JSON text; `Run.from_json` reads it back."""
        state = self.state
        if isinstance(state, BaseModel):
            state = state.model_dump(mode="json")
        data = {
            "format": RUN_FORMAT,
            "run_id": self.run_id,
            "workflow_name": self.workflow_name,
            "input": self.input,
            "output": self.output if _is_jsonable(self.output) else repr(self.output),
            "state": state,
            "status": self.status,
            "error": self.error,
            "history": [m.model_dump(mode="json") for m in self.history],
            "turns": [t.model_dump(mode="json") for t in self.turns],
            "report": self.report.model_dump(mode="json"),
            "usage": self.usage.model_dump(mode="json"),
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "replay_diverged_at": self.replay_diverged_at,
            "states": {str(k): v for k, v in self.states.items()},
        }
        return json.dumps(data, indent=indent, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes, *, state_type: type[BaseModel] | None = None) -> Run:
        """Read a run written by `to_json`; the state comes back as a dict unless
        `state_type` is given."""
        data = json.loads(text)
        run = cls(workflow_name=data["workflow_name"], input=data["input"], run_id=data["run_id"])
        state = data.get("state")
        run.state = state_type.model_validate(state) if state_type and state is not None else state
        run.output = data.get("output")
        run.status = data["status"]
        run.error = data.get("error")
        run.history = [Message.model_validate(m) for m in data["history"]]
        run.turns = [Turn.model_validate(t) for t in data["turns"]]
        run.report = ReportNode.model_validate(data["report"])
        run.usage = Usage.model_validate(data["usage"])
        run.started_at = datetime.fromisoformat(data["started_at"])
        finished = data.get("finished_at")
        run.finished_at = datetime.fromisoformat(finished) if finished else None
        run.replay_diverged_at = data.get("replay_diverged_at")
        run.states = {int(k): v for k, v in (data.get("states") or {}).items()}
        return run

    def _repr_html_(self) -> str:
        from thena_nb.core import _html

        try:
            from thena_nb.notebook.charts import failure_chart, figure_png_b64
            from thena_nb.notebook.frames import frame_html, turn_frame
        except ImportError:  # pandas or matplotlib missing: the stdlib view only
            return _html.run_html(self)
        chart = figure_png_b64(failure_chart(self.turns, self.loops)) if self.loops else None
        return _html.run_html(
            self, frame_html=frame_html(turn_frame(self.turns)), chart_png_b64=chart
        )

    def __repr__(self) -> str:
        reasons = ", ".join(f"{r}" for r in self.stop_reasons.values() if r)
        extra = f", stop_reasons=[{reasons}]" if reasons else ""
        return (
            f"Run({self.workflow_name!r}, status={self.status!r}, turns={len(self.turns)}"
            f"{extra}, run_id={self.run_id!r})"
        )


def _is_jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
