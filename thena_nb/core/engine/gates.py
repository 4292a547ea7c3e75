"""Tool gates: hold a turn's calls before any tool runs, until each has a `Decision`.

A call is gated when its tool says so (`@tool(gate=True)`, or `@tool(gate=fn)` with
`fn(call)` true) or when a predicate in `session.gates` holds it. Once a turn's model call
has returned, every gated call of the turn is held together, before any tool of the turn
runs, and decided one of three ways:

- `approve=fn` (on `wf.run`, `wf.session`, `wf.resume`): `fn(pending_call)` (sync or async)
  returns the `Decision`, call by call, in call order. It works everywhere, inside
  `parallel` branches too.
- A stepped session (`wf.session(...)`): it pauses before the turn's tools (`paused_at ==
  "tools"`) with the calls in `session.pending`; `session.decide(call_id, decision)` for
  each, then `step()` or `run()` goes on.
- `wf.run(...)` (and experiments, forks, resumes) without `approve=`: the run ends with
  status `"waiting"`, `run.pending` lists the calls, and it is stored with the waiting
  turn's model reply; `wf.resume(run_id, decisions={call_id: Decision...})` goes on from
  there, in any process, without calling the model again or running any tool twice.

Inside a `parallel` branch only `approve=` can decide: a branch neither pauses a session
nor leaves a waiting run, so a gated call there without `approve=` fails the run with a
`GateError` that says so.

A gate is checked on the arguments the model chose, so it may raise on them (a missing key):
a gate that raises holds the call (fail safe), and `PendingCall.gate_error` says why. A
session stopped while calls are held keeps the turn (its reply, its calls not run) and
stops.

Every decision is kept on its call (`ToolCall.decision`, and `original_arguments` for an
edit), so a replay, a fork and a resume reproduce it without asking again. The history
keeps the calls as the model made them; the tool message carries the decided outcome.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from thena_nb.core.engine._replay import Replay
from thena_nb.core.engine._signals import Halt
from thena_nb.core.parts.steps import walk
from thena_nb.core.parts.tools import Tool, error_observation, exception_text, readable
from thena_nb.core.records.decisions import (
    Approver,
    Decision,
    PendingCall,
    pending_from_json,
    pending_json,
    proposed_call,
)
from thena_nb.core.records.errors import ThenaError
from thena_nb.core.records.types import ToolCall, Turn, finished

if TYPE_CHECKING:
    from thena_nb.core.engine._run_state import Position
    from thena_nb.core.parts.agent import Agent
    from thena_nb.core.runs.run import Run

__all__ = [
    "Approver",
    "Decision",
    "GateError",
    "Gatekeeper",
    "PendingCall",
    "WaitingReplay",
    "hold",
    "pending_from_json",
    "pending_json",
    "proposed_call",
    "resume_decisions",
]


class GateError(ThenaError):
    """A tool gate cannot go on: an undecided call, an unknown call id, a bad edit."""


class Waiting(Halt):
    """The run ends here, waiting for decisions (`wf.run` without `approve=`)."""

    def __init__(self, pending: list[PendingCall]) -> None:
        BaseException.__init__(self, "waiting")
        self.reason = None  # type: ignore[assignment]  # a waiting loop has no stop reason
        self.detail = ""
        self.pending = pending
        self.turn: Turn | None = None
        """The waiting turn: its model reply and its calls as the model made them."""


class Gatekeeper:
    """How one run decides its gated calls: decisions given ahead (a resume), an `approve`
    function, a session's pause (`pause`), or else the run waits."""

    def __init__(
        self,
        approve: Approver | None = None,
        pause: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.approve = approve
        self.pause = pause
        self.decided: dict[str, Decision] = {}
        self.pending: list[PendingCall] = []
        """The calls a paused session waits on that are not decided yet."""
        self._agent: Agent | None = None

    def decide(self, call_id: str, decision: Decision) -> None:
        """Decide one pending call; a bad decision raises and the call stays pending."""
        held = {p.call.id: p for p in self.pending}
        if call_id not in held:
            raise GateError(
                f"no pending call {call_id!r}; the pending calls are "
                f"{_ids(self.pending) or 'none (nothing waits for a decision)'}"
            )
        assert self._agent is not None
        check_decision(decision, held[call_id].call, self._agent)
        self.decided[call_id] = decision
        self.pending = [p for p in self.pending if p.call.id != call_id]

    def check_decided(self, what: str) -> None:
        """Raise unless every pending call has a decision (before `step()` / `run()`)."""
        if self.pending:
            raise GateError(
                f"cannot {what}: tool calls {_ids(self.pending)} wait for a decision; call "
                f"`session.decide(call_id, Decision.approve())` (or `.edit(...)`, "
                f"`.reject(...)`, `.respond(...)`) for each of `session.pending` first"
            )

    async def ask(self, pending: list[PendingCall], agent: Agent, at: Position) -> list[Decision]:
        """The decisions for `pending`, in order, however this run decides."""
        if self.approve is not None:
            return [await self._approved(p, agent) for p in pending]
        if not at.top_level:
            raise GateError(
                f"tool calls {_ids(pending)} of agent {agent.name!r} in a parallel branch "
                f"({pending[0].step_path!r}) need a decision, but inside a `parallel` block "
                f"only `approve=` can decide: pass `approve=fn` to wf.run / wf.session / "
                f"wf.resume, or move the agent out of the block"
            )
        if self.pause is None:
            raise Waiting(pending)
        self._agent, self.pending = agent, list(pending)
        try:
            await self.pause()
        finally:
            self.pending = []
        if at.control.stop_requested:
            return []  # stopped while held: `hold` keeps the turn, its calls not run
        return [self.decided.pop(p.call.id) for p in pending]

    async def _approved(self, pending: PendingCall, agent: Agent) -> Decision:
        assert self.approve is not None
        decision = self.approve(pending)
        if inspect.isawaitable(decision):
            decision = await decision
        check_decision(decision, pending.call, agent)
        assert isinstance(decision, Decision)
        return decision


def _ids(pending: Sequence[PendingCall]) -> str:
    return ", ".join(repr(p.call.id) for p in pending)


# -- the turn's side -------------------------------------------------------------------------


def is_gated(agent: Agent, call: ToolCall, predicates: Sequence[Callable[[ToolCall], Any]]) -> bool:
    """Whether the call's tool gate or one of the session's predicates holds `call`."""
    return gate_check(agent, call, predicates)[0]


def gate_check(
    agent: Agent, call: ToolCall, predicates: Sequence[Callable[[ToolCall], Any]]
) -> tuple[bool, str | None]:
    """Whether `call` is held, and the error of a gate that raised on it.

    The arguments are the model's choice, so a predicate may raise on them (a missing key,
    a wrong type): such a gate holds the call (fail safe) and its error is shown with it.
    """
    tool = agent._by_name.get(call.name)
    gate = tool.gate if tool is not None else False
    if gate is True:
        return True, None
    checks = [gate, *predicates] if callable(gate) else list(predicates)
    for check in checks:
        try:
            if check(call):
                return True, None
        except Exception as exc:
            return True, _raised(exc, own=check is gate)
    return False, None


def _raised(exc: Exception, *, own: bool) -> str:
    """`"KeyError: 'amount'"`: a gate's exception as text, saying where it was raised."""
    where = "" if own else " (in a `session.gates` predicate)"
    return f"{readable(exception_text(exc))}{where}"


async def hold(
    agent: Agent, at: Position, path: str, proposed: list[ToolCall], recorded: Turn | None
) -> list[ToolCall]:
    """The turn's calls with every decision applied, before any tool runs.

    A call decided ahead (a resume's `decisions`, for the waiting turn it serves again) or
    decided in the recording (a replay that runs its tools again) is not asked again; the
    gated rest are asked together. A live turn takes no decision given ahead: when a resume
    goes live before the waiting turn, its calls are new ones, and wait anew.
    """
    control = at.control
    keeper = control.gatekeeper or Gatekeeper()
    past = {c.id: c for c in recorded.tool_calls} if recorded is not None else {}
    ahead_of = keeper.decided if recorded is not None else {}
    out = list(proposed)
    asked: list[int] = []
    errors: dict[int, str] = {}
    for i, call in enumerate(proposed):
        if call.ok is not None:
            continue  # refused before it could run
        ahead = ahead_of.pop(call.id, None)
        earlier = past.get(call.id)
        if ahead is not None:
            out[i] = apply_decision(call, ahead)
        elif earlier is not None and earlier.decision is not None:
            out[i] = _reproduce(call, earlier)
        else:
            held, error = gate_check(agent, call, control.gates)
            if held:
                asked.append(i)
            if error is not None:
                errors[i] = error
    if asked:
        index = len(at.scope.turns)
        pending = [
            PendingCall(
                call=out[i],
                turn_index=index,
                step_path=path,
                agent=agent.name,
                gate_error=errors.get(i),
            )
            for i in asked
        ]
        decisions = await keeper.ask(pending, agent, at)
        if control.stop_requested:
            return _stopped_at_gate(out, at)
        for i, decision in zip(asked, decisions, strict=True):
            out[i] = apply_decision(out[i], decision)
    return out


def _stopped_at_gate(calls: list[ToolCall], at: Position) -> list[ToolCall]:
    """`Session.stop()` while the turn's calls were held: the turn is kept (its model reply
    and its calls), no call of it runs, and the run stops once it is recorded."""
    at.stopped = at.stopped or ""  # the turn records, then the run stops (core/engine/_turn.py)
    reason = "the run was stopped before it ran"
    return [
        c
        if c.ok is not None
        else finished(c, ok=False, error=error_observation(c.name, c.arguments, reason=reason))
        for c in calls
    ]


def check_decision(decision: Any, call: ToolCall, agent: Agent) -> None:
    """Raise unless `decision` is a `Decision` that fits `call` (an edit fits the schema)."""
    if not isinstance(decision, Decision):
        raise TypeError(
            f"the decision for tool call {call.id!r} must be a `Decision` (Decision.approve(), "
            f".edit(arguments), .reject(reason) or .respond(result)), got {decision!r}"
        )
    tool: Tool | None = agent._by_name.get(call.name)
    if decision.kind != "edit" or tool is None:
        return
    try:
        tool.validate(decision.arguments or {})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise GateError(
            f"the edited arguments for tool call {call.id!r} do not fit tool {tool.name!r}: "
            f"{problems}. The call is still pending; decide it again with arguments that fit "
            f"{tool.parameters}"
        ) from None


def apply_decision(call: ToolCall, decision: Decision) -> ToolCall:
    """`call` as the decision leaves it: ready to run (approve, edit) or finished."""
    kind = decision.kind
    if kind == "approve":
        return finished(call, decision="approve")
    if kind == "edit":
        arguments = dict(decision.arguments or {})
        return finished(
            call, arguments=arguments, original_arguments=call.arguments, decision="edit"
        )
    if kind == "reject":
        error = error_observation(call.name, call.arguments, reason=decision.reason)
        return finished(call, ok=False, error=error, decision="reject")
    return finished(call, ok=True, result=decision.result, decision="respond")


def _reproduce(call: ToolCall, earlier: ToolCall) -> ToolCall:
    """A recorded decision applied again: the same arguments or the same outcome."""
    if earlier.decision == "edit":
        return finished(
            call, arguments=earlier.arguments, original_arguments=call.arguments, decision="edit"
        )
    if earlier.decision in ("reject", "respond"):
        return finished(
            call,
            ok=earlier.ok,
            result=earlier.result,
            error=earlier.error,
            decision=earlier.decision,
        )
    return finished(call, decision=earlier.decision)


# -- waiting runs: stored, then resumed ------------------------------------------------------


class WaitingReplay(Replay):
    """Resume a waiting run: its turns as recorded, then its waiting turn's reply (no
    model call) whose tools run now, with the decisions given."""

    def __init__(self, recorded: Run) -> None:
        super().__init__(recorded)
        self._waiting = recorded.pending_turn
        if self._waiting is not None:
            self._by_index[self._waiting.index] = self._waiting

    def lookup(
        self, index: int, path: str, request_key: str, *, in_branch: bool = False
    ) -> Turn | None:
        turn = super().lookup(index, path, request_key, in_branch=in_branch)
        # The waiting turn's calls have not run: its tools run, the others' are reused.
        self.rerun_tools = turn is not None and turn is self._waiting
        return turn


def resume_decisions(
    run: Run,
    workflow: Any,
    decisions: Mapping[str, Decision] | None,
    approve: Approver | None,
) -> dict[str, Decision]:
    """Check the decisions given to resume `run` against its pending calls.

    Raises:
        GateError: A decision names no pending call, a pending call has none (and there is
            no `approve=`), the run is not waiting, or an edit does not fit its tool.
    """
    given = dict(decisions or {})
    ids = [p.call.id for p in run.pending]
    if run.status != "waiting":
        if given:
            raise GateError(
                f"run {run.run_id!r} is not waiting for decisions (its status is "
                f"{run.status!r}); resume it without `decisions=`"
            )
        return given
    unknown = [i for i in given if i not in ids]
    if unknown:
        raise GateError(
            f"run {run.run_id!r} has no pending call {', '.join(map(repr, unknown))}; its "
            f"pending calls are {_ids(run.pending)}"
        )
    missing = [i for i in ids if i not in given]
    if missing and approve is None:
        raise GateError(
            f"run {run.run_id!r} waits for decisions on tool calls "
            f"{', '.join(map(repr, missing))}: pass `decisions={{call_id: Decision...}}` "
            f"with one for each (see `run.pending`), or `approve=fn`"
        )
    for p in run.pending:
        if p.call.id in given:
            check_decision(given[p.call.id], p.call, _agent_at(workflow, p))
    return given


def _agent_at(workflow: Any, pending: PendingCall) -> Any:
    """The agent that made a pending call, found in `workflow` by step path, else name."""
    found = None
    for path, step in walk(workflow.steps, workflow.name):
        if getattr(step, "kind", None) == "agent" and step.name == pending.agent:
            if path == pending.step_path:
                return step
            found = found or step
    if found is None:
        raise GateError(
            f"workflow {workflow.name!r} has no agent {pending.agent!r}, which made pending "
            f"call {pending.call.id!r}; resume with the workflow that made the run"
        )
    return found
