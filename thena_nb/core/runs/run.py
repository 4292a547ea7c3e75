"""`Run`: one run of a workflow, readable at any moment, and its one JSON serialisation."""

from __future__ import annotations

import json
import os
import weakref
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from thena_nb.core import _portals
from thena_nb.core.parts.steps import walk
from thena_nb.core.records import _sent
from thena_nb.core.records.decisions import PendingCall, pending_from_json, pending_json
from thena_nb.core.records.model import ModelRequest, render_request
from thena_nb.core.records.report import ReportNode, new_node
from thena_nb.core.records.types import (
    LoopStopReason,
    Message,
    RunStatus,
    Turn,
    TurnInfo,
    Usage,
    blank,
    construct,
)
from thena_nb.core.runs._current import current_run, current_run_id
from thena_nb.core.runs.diff import RunDiff
from thena_nb.core.runs.what_if import WhatIf, what_if

__all__ = [
    "INTERRUPTED",
    "RUN_FORMAT",
    "Run",
    "current_run",
    "current_run_id",
    "json_state",
    "jsonable",
    "last_run",
]

RUN_FORMAT = 1
"""The version of the JSON a `Run` is written as."""

INTERRUPTED = (
    "interrupted: cancelled before it ended (a keyboard interrupt, or its task was cancelled)"
)
"""`Run.error` of a run that was cancelled (status `"stopped"`): a re-run does not take it as
done."""

_last: list[weakref.ref[Run]] = []
"""The run started last in this process (`last_run`), held weakly: it never keeps a run
alive that nothing else holds (an interrupt's `exc.run` holds a partial one)."""


def last_run() -> Run | None:
    """The run started last in this process: finished, stopped, failed or still running;
    `None` before the first, or once nothing else holds that run. After a keyboard interrupt
    it is the partial run, with every finished turn (also `exc.run` of the interrupt).

    Example:
        >>> from thena_nb import Agent, Workflow, last_run
        >>> from thena_nb.models import ScriptedModel
        >>> run = Workflow("hi", [Agent("A", model=ScriptedModel(["hello"]))]).run("x", store=False)
        >>> last_run() is run
        True
    """
    return _last[0]() if _last else None


def remember(run: Run) -> None:
    """A run has started: it is `last_run()` now."""
    _last[:] = [weakref.ref(run)]


_PLAIN = frozenset({str, float, bool, type(None)})
"""Types `json.dumps` always writes (a float that is not finite as `NaN` or `Infinity`; not
`int`, whose digits past Python's limit it refuses)."""


def jsonable(value: Any) -> bool:
    """Whether `json.dumps` can write `value`.

    Example:
        >>> jsonable("done"), jsonable({"a": [1, 2.5, None]}), jsonable({1, 2})
        (True, True, False)
    """
    if type(value) in _PLAIN:  # a run's usual output and state: no trial dump needed
        return True
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def json_state(state: Any) -> Any:
    """A workflow state as JSON data: a pydantic model dumped, a dict as it is, else `None`."""
    if isinstance(state, BaseModel):
        return state.model_dump(mode="json")
    return state if jsonable(state) else None


_NO_USAGE = blank(Usage)
_NO_USAGE.update(Usage().model_dump())  # (its keys shared: `blank`)


def _user_message(text: str) -> Message:
    """The message that starts a run, built without validation when `text` is a `str`."""
    if type(text) is not str:
        return Message(role="user", content=text)
    message = blank(Message)
    message["role"] = "user"
    message["content"] = text
    message["tool_calls"] = []
    message["is_error"] = False
    message["reasoning_blocks"] = ()
    return construct(Message, message)


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
        self.run_id = run_id or os.urandom(6).hex()  # 12 hex digits, as uuid4().hex[:12]
        self.workflow_name = workflow_name
        self.input = input
        self.output: Any = None
        self.state = state
        self.status: RunStatus = "running"
        self.error: str | None = None
        self.history: list[Message] = [_user_message(input)]
        self.turns: list[Turn] = []
        self.report = new_node("workflow", workflow_name, workflow_name)
        self.usage = construct(Usage, _NO_USAGE.copy())
        self.started_at = datetime.now(UTC)
        self.finished_at: datetime | None = None
        self.replay_diverged_at: int | None = None
        self.parent_run_id: str | None = None
        """The run this one was forked from (`run.fork`), or `None`."""
        self.forked_at: int | None = None
        """The turn of the parent run from which a fork went live, or `None`."""
        self._parent: Run | None = None
        self.states: dict[int, Any] = {}
        """The state after each turn (JSON-ready), when the workflow has state; replay and
        resume restore it."""
        self.workflow: Any = None
        """The `Workflow` that made this run (not serialised)."""
        self.pending: list[PendingCall] = []
        """A waiting run's gated calls, each waiting for a `Decision` (see `wf.resume`)."""
        self.pending_turn: Turn | None = None
        """A waiting run's waiting turn: its model reply and its calls as the model made them
        (not yet in `turns`); resume goes on from it without calling the model again."""

        self.request_parts: dict[str, Any] = {}
        """The system prompts and tool-spec lists the turns' requests refer to, each distinct
        value once, by key (`SentRequest.system`, `SentRequest.tools`); JSON-ready."""
        self.open_turns: list[Turn] = []
        """A stored run's parallel-branch turns that finished while their block was still
        open (the process ended before the block merged); a resume reuses them."""

    @property
    def turn_infos(self) -> list[TurnInfo]:
        """The `TurnInfo` of every turn, in order."""
        return [t.info for t in self.turns]

    @property
    def loops(self) -> list[ReportNode]:
        """Every loop node of the report, in pre-order."""
        out, todo = [], [self.report]
        while todo:  # pre-order; an agent node has no children to walk into
            node = todo.pop()
            if node.kind == "loop":
                out.append(node)
            if node.children:
                todo.extend(reversed(node.children))
        return out

    @property
    def stop_reasons(self) -> dict[str, LoopStopReason | None]:
        """Each loop's stop reason, by step path (the last run of each loop wins)."""
        return {n.path: n.stop_reason for n in self.loops}

    @property
    def cost_usd(self) -> float | None:
        """What the run's model calls cost in US dollars (`usage.cost_usd`): replayed turns
        cost nothing; `None` when a turn's model had no price (an offline model, or one
        genai-prices does not know)."""
        return self.usage.cost_usd

    def frame(self) -> Any:
        """The turns as a pandas DataFrame, one row per turn (needs pandas)."""
        return _portals.turn_frame(self.turns)

    def failure_chart(self) -> Any:
        """A matplotlib Figure of each loop's consecutive-failure streak (needs matplotlib)."""
        return _portals.failure_chart(self.turns, self.loops)

    @classmethod
    def load(cls, run_id: str, *, store: Any = None) -> Run:
        """Load a stored run (from the default store unless `store` is given).

        A run loaded from a store has no `workflow`; pass one to `fork`.

        Raises:
            StoreError: No run `run_id` is stored, or there is no store.
        """
        return _portals.require_store(store).load(run_id)

    def fork(
        self,
        at: int,
        *,
        reply: Any = None,
        tool_results: Mapping[str, str] | None = None,
        inject: Sequence[Message | str] | None = None,
        changes: Mapping[str, Mapping[str, Any]] | None = None,
        workflow: Any = None,
        store: Any = None,
    ) -> Run:
        """A new run that reuses turns `0..at-1` of this one (no model call, no tool call)
        and runs turn `at` onward live, with `changes` applied to the workflow.

        Args:
            at: The turn to go live from (or to edit).
            reply: Turn `at`'s reply instead of a model call (text, `reply.tool(...)`,
                `reply.calls(...)` or a `Reply`); its calls run live (text is the answer as
                given: calls written in it are not rescued). The turn has `attempts == 0`
                (no model call) and `replayed == False` (it is new).
            tool_results: `{call_id: text}`: turn `at` keeps its recorded reply and
                results, those calls' replaced (`ok=True`, `decision="respond"`); the run
                goes live from turn `at + 1`. Not with `reply=` or `inject=`.
            inject: User messages (`Message`s or text) put into the history before turn
                `at`'s model call.
            changes: `{agent name or step path: {field: value}}`, as `wf.map` takes them.
            workflow: The workflow to run (needed for a run loaded from a store).
            store: Where the fork is kept (the default store when not given).

        The fork records `parent_run_id` and `forked_at == at`; `run.parent` is this run.

        Raises:
            ValueError: `at` is out of range, a call id is not turn `at`'s, or the edits do
                not go together.

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
            >>> edited = run.fork(1, reply="Stop here.", store=False)
            >>> [t.info.response for t in edited.turns], edited.forked_at
            (['', 'Stop here.'], 1)
            >>> said = run.fork(0, tool_results={"call_1_0": "3"}, changes=brief, store=False)
            >>> said.turns[0].tool_calls[0].decision, said.history[2].content, said.output
            ('respond', '3', 'Two.')
        """
        wf = self._workflow_for("fork", workflow)
        edits = {"reply": reply, "tool_results": tool_results, "inject": inject}
        # The workflow carries out the fork: it sits above the run, which holds it.
        forked: Run = wf._fork(self, at, changes=changes, store=store, **edits)
        return forked

    def continue_with(
        self, text: str, *, workflow: Any = None, store: Any = None, replay: Run | None = None
    ) -> Run:
        """A multi-turn conversation: a new run whose history is this run's plus the user
        message `text`; the workflow's steps run again from the top, live.

        This run's turns are part of the new run, kept as recorded (`replayed=True`, indexes
        `0..n-1`) and not run again; the new turns are numbered from `n`. The new run's
        `input` is `text`, `parent_run_id` is this run's id, `forked_at` is `n`, and it
        starts with the state this run ended with. It is stored like any run.

        Args:
            text: The user's next message.
            workflow: The workflow to run (needed for a run loaded from a store).
            store: Where the new run is kept (the default store when not given).
            replay: An earlier continuation of this run (e.g. loaded with `Run.load`): its
                new turns are reused (no model or tool call) while the new run asks the same
                things, as `wf.run(..., replay=)` does; `replay_diverged_at` says where the
                new run went live.

        Example:
            >>> from thena_nb import Agent, Workflow
            >>> from thena_nb.models import FunctionModel
            >>> echo = FunctionModel(lambda request: "You said " + request.messages[-1].content)
            >>> wf = Workflow("chat", [Agent("A", model=echo)])
            >>> first = wf.run("hello", store=False)
            >>> second = first.continue_with("bye", store=False)
            >>> [m.content for m in second.history], second.input
            (['hello', 'You said hello', 'bye', 'You said bye'], 'bye')
            >>> [(t.index, t.replayed) for t in second.turns], second.forked_at
            ([(0, True), (1, False)], 1)
            >>> again = first.continue_with("bye", replay=second, store=False)
            >>> again.output, again.turns[1].replayed, len(echo.requests)
            ('You said bye', True, 2)
        """
        wf = self._workflow_for("continue", workflow)
        continued: Run = wf._continue(self, text, store=store, replay=replay)
        return continued

    def _workflow_for(self, action: str, workflow: Any) -> Any:
        wf = workflow if workflow is not None else self.workflow
        if wf is None:
            raise ValueError(
                f"run {self.run_id!r} has no workflow (it was loaded from a store); pass "
                f"`workflow=` to {action} it"
            )
        return wf

    def what_if(self, until: Callable[..., Any]) -> dict[str, WhatIf]:
        """Where each loop would have stopped under another `until`, from the recorded turns
        alone (no model call): `{loop_path: WhatIf(iteration, stop_reason)}`."""
        return what_if(self, until)

    def diff(self, other: Run) -> RunDiff:
        """This run's turns beside `other`'s, aligned by where they ran, and the first place
        the two part, with its cause (no model call).

        Turns pair by step path and the iteration of every loop around them, in order;
        `first_divergence` is the first pair that differs (found from the request keys) and
        says why: `"agent"` (the system prompt or another field of the agent changed),
        `"message"` (an earlier message of the history differs, e.g. the input),
        `"reply"`, `"tool_result"`, `"stop"` (a loop stopped sooner) or `"steps"`.

        Args:
            other: The run to compare with (run `b`; this run is run `a`).

        Returns:
            A `RunDiff`: `first_divergence`, `pairs`, `frame()` and an HTML view.

        Example:
            >>> from thena_nb import Agent, Workflow
            >>> from thena_nb.models import ScriptedModel
            >>> wf = Workflow("hello", [Agent("Greeter", model=ScriptedModel(["Hello!"]))])
            >>> run = wf.run("hi", store=False)
            >>> d = run.diff(wf.run("hello", store=False)).first_divergence
            >>> d.cause, d.message, d.detail
            ('message', 0, "message 0 of the history (the input) differs: 'hi' → 'hello'")
        """
        return RunDiff(self, other)

    def request_of(self, turn: Turn | int) -> ModelRequest:
        """What the model was sent for `turn` (a `Turn` of this run or its index): the system
        prompt, the tool specs, the messages exactly as sent after the agent's history
        processor, `max_tokens` and the model's name. Works during the run, after it and on
        a run loaded from a store.

        Example:
            >>> from thena_nb import Agent, Workflow
            >>> from thena_nb.models import ScriptedModel
            >>> agent = Agent("Greeter", model=ScriptedModel(["Hello!"]), system="Be warm.")
            >>> run = Workflow("hello", [agent]).run("hi", store=False)
            >>> sent = run.request_of(0)
            >>> sent.system, [m.content for m in sent.messages], sent.model
            ('Be warm.', ['hi'], 'scripted')

        Raises:
            ValueError: The turn is not in this run, or has no recorded request.
        """
        return _sent.rebuild(self._turn_at(turn), self.history, self.request_parts)

    def wire_request_of(self, turn: Turn | int, *, model: Any = None) -> dict[str, Any]:
        """What the model adapter put on the wire for `turn`: its `render(request)` of
        `request_of(turn)` (for `AnthropicModel` the keyword arguments of `messages.create`,
        for `OpenAICompatModel` those of `chat.completions.create`; never a key or auth
        header), or, for a model without `render` (offline models), `render_request`'s
        `{"messages": [...], "system": ..., "tools": [...]}`.

        Args:
            turn: A `Turn` of this run or its index.
            model: The model to render with; by default the model of the turn's agent in
                `run.workflow`.

        Example:
            >>> from thena_nb import Agent, Workflow
            >>> from thena_nb.models import ScriptedModel
            >>> wf = Workflow("w", [Agent("A", model=ScriptedModel(["ok"]))])
            >>> run = wf.run("hi", store=False)
            >>> run.wire_request_of(0)["messages"][0]["content"]
            'hi'

        Raises:
            ValueError: The run has no workflow (loaded from a store) and no `model=` was
                given, or the workflow has no agent that took this turn.
        """
        picked = self._turn_at(turn)
        request = self.request_of(picked)
        if model is None:
            model = self._model_of(picked)
        render = getattr(model, "render", None)
        wire = render(request) if render is not None else render_request(request)
        return dict(wire)

    def _turn_at(self, turn: Turn | int) -> Turn:
        if isinstance(turn, Turn):
            index = turn.index
            if index < len(self.turns) and self.turns[index] is turn:
                return turn
            if index < len(self.turns) and self.turns[index] == turn:
                return self.turns[index]
            raise ValueError(f"turn {index} is not a turn of run {self.run_id!r}")
        if isinstance(turn, bool) or not isinstance(turn, int):
            raise TypeError(f"`turn` must be a Turn or a turn index, got {turn!r}")
        if not 0 <= turn < len(self.turns):
            raise ValueError(
                f"run {self.run_id!r} has turns 0 to {len(self.turns) - 1}, not turn {turn}"
            )
        return self.turns[turn]

    def _model_of(self, turn: Turn) -> Any:
        """The model of the agent that took `turn`, found in `run.workflow`."""
        wf = self.workflow
        if wf is None:
            raise ValueError(
                f"run {self.run_id!r} has no workflow (it was loaded from a store); pass "
                f"`model=` to render its requests"
            )
        agents = [(p, s) for p, s in walk(wf.steps, wf.name) if getattr(s, "kind", "") == "agent"]
        for path, step in agents:
            if path == turn.step_path:
                return step.model
        for _, step in agents:
            if step.name == turn.agent:
                return step.model
        raise ValueError(
            f"the workflow {wf.name!r} has no agent {turn.agent!r} (turn {turn.index}); pass "
            f"`model=`"
        )

    @property
    def parent(self) -> Run | None:
        """The run this one was forked from: the object itself when the fork was made in this
        process, else loaded from the default store; `None` for a run that is no fork.

        Raises:
            StoreError: The parent is not at hand and the default store does not hold it.
        """
        if self.parent_run_id is None:
            return None
        if self._parent is None:
            self._parent = Run.load(self.parent_run_id)
        return self._parent

    def header(self) -> dict[str, Any]:
        """What is known of the run when it starts, JSON-ready (what a store writes first)."""
        return {
            "run_id": self.run_id,
            "workflow": self.workflow_name,
            "input": self.input,
            "status": self.status,
            "started_at": self.started_at.isoformat(),
            "parent_run_id": self.parent_run_id,
            "forked_at": self.forked_at,
        }

    def ending(self) -> dict[str, Any]:
        """How the run ended, JSON-ready: the one serialisation of a run's outcome, used by
        `to_json` and by every store. An output that JSON cannot hold is kept as its repr,
        a state as `None`."""
        return {
            "status": self.status,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "error": self.error,
            "usage": self.usage.model_dump(mode="json"),
            "stop_reasons": self.stop_reasons,
            "output": self.output if jsonable(self.output) else repr(self.output),
            "state": json_state(self.state),
            "replay_diverged_at": self.replay_diverged_at,
            "pending": pending_json(self),
        }

    def to_json(self, *, indent: int | None = None) -> str:
        """The run as JSON text; `Run.from_json` reads it back."""
        header, ending = self.header(), self.ending()
        data = {
            "format": RUN_FORMAT,
            "run_id": self.run_id,
            "workflow_name": self.workflow_name,
            "input": self.input,
            "output": ending["output"],
            "state": ending["state"],
            "status": self.status,
            "error": self.error,
            "history": [m.model_dump(mode="json") for m in self.history],
            "turns": [t.model_dump(mode="json") for t in self.turns],
            "report": self.report.model_dump(mode="json"),
            "usage": ending["usage"],
            "started_at": header["started_at"],
            "finished_at": ending["finished_at"],
            "replay_diverged_at": self.replay_diverged_at,
            "parent_run_id": self.parent_run_id,
            "forked_at": self.forked_at,
            "states": {str(k): v for k, v in self.states.items()},
            "pending": ending["pending"],
            "request_parts": self.request_parts,
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
        run.parent_run_id = data.get("parent_run_id")
        run.forked_at = data.get("forked_at")
        run.states = {int(k): v for k, v in (data.get("states") or {}).items()}
        run.pending, run.pending_turn = pending_from_json(data.get("pending"))

        run.request_parts = dict(data.get("request_parts") or {})
        return run

    def stepper(self, *, workflow: Any = None, store: Any = None) -> _portals.Stepper:
        """Open the Stepper on this run in view mode (needs ipywidgets): scrub its turns,
        inspect each one, read the turn table and the failure chart, ask what-if, and fork
        it from the shown turn into a live session. The same as `thena_nb.stepper(run)`.

        Args:
            workflow: The workflow (or the agent it was made of) that "Fork from here"
                runs; by default `run.workflow`. A run loaded from a store has none, and
                without one forking is off.
            store: Where a fork is kept (the default store when not given).

        Example:
            >>> from thena_nb import Agent, Workflow
            >>> from thena_nb.models import ScriptedModel
            >>> wf = Workflow("hi", [Agent("A", model=ScriptedModel(["hello"]))])
            >>> viewed = wf.run("go", store=False).stepper()
            >>> viewed.mode, viewed.turn_count, viewed.fork_button.disabled
            ('view', 1, False)
        """
        return _portals.stepper(self, workflow=workflow, store=store)

    def to_html(self, path: str | os.PathLike[str]) -> Path:
        """Write the run as one self-contained HTML file: its transcript, an inspector of
        each turn (reply, what the model saw, reasoning, tools), the turn table and the
        failure chart as inline SVG, with back/forward over the turns. The file needs no
        network, no kernel and no CDN; every text in it is escaped.

        Args:
            path: The file to write (its directory must exist).

        Returns:
            The path written.

        Example:
            >>> import pathlib, tempfile
            >>> from thena_nb import Agent, Workflow
            >>> from thena_nb.models import ScriptedModel
            >>> run = Workflow("w", [Agent("A", model=ScriptedModel(["hi"]))]).run(
            ...     "go", store=False)
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     page = run.to_html(pathlib.Path(tmp) / "run.html")
            ...     page.read_text().startswith("<!doctype html>")
            True
        """
        return _portals.run_page(self, path)

    def _repr_html_(self) -> str:
        return _portals.run_html(self)

    def __repr__(self) -> str:
        reasons = ", ".join(f"{r}" for r in self.stop_reasons.values() if r)
        extra = f", stop_reasons=[{reasons}]" if reasons else ""
        extra += _cost_repr(self.usage)
        return (
            f"Run({self.workflow_name!r}, status={self.status!r}, turns={len(self.turns)}"
            f"{extra}, run_id={self.run_id!r})"
        )


def _cost_repr(usage: Usage) -> str:
    """`, cost=$0.0045, saved=$0.0123` for a run with a known cost or a replay's saving."""
    cost, saved = usage.cost_usd, usage.saved_usd
    out = f", cost=${_dollars(cost)}" if cost is not None and (cost or saved) else ""
    return out + (f", saved=${_dollars(saved)}" if saved else "")


def _dollars(amount: float) -> str:
    return f"{amount:.6f}".rstrip("0").rstrip(".")
