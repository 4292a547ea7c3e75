"""`RunDiff`: two runs' turns side by side, and the first place they part, with its cause.

Turns pair by where they ran: the step path (without the workflow's name, so two workflows
of another name still pair) and the iteration of every loop around the turn, read from the
report tree, in order. A turn with no counterpart in the other run stands alone. The first
pair that differs is the first divergence; what the runs record tells its cause:

- `"agent"`: the request keys differ but the history the turn saw is the same, message for
  message, so what the agent sends besides the history changed: its system prompt, model,
  tools, output limit or history processor (named when both runs carry their workflow; the
  model is also on the turn).
- `"message"`: the request keys differ and so does the history the turn saw; `message` is
  the first history message that differs (0 is the input).
- `"reply"`: the same request (same key) got another reply, text or tool calls.
- `"tool_result"`: the same request and the same calls, but a call returned something else
  (the tool changed, or what it reads did).
- `"stop"`: one run has a turn where the other has none, and a loop around it stopped
  otherwise (stop reason or iterations on its report node), or the shorter run ran out of
  budget or was stopped: a stop condition, a limit or the budget ended a loop sooner.
- `"steps"`: one run has a turn where the other has none for another reason: the workflows'
  steps differ, or the shorter run failed or is still running.

A turn a run reused from a recording (`Turn.replayed`) with the same reply and tool results
as its counterpart is not a divergence even when its request key differs: a fork keeps the
turns before `at` whatever its changed workflow would have asked (`TurnPair.reused`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from thena_nb.core import _portals
from thena_nb.core.parts.steps import callable_name, walk
from thena_nb.core.records import _html
from thena_nb.core.records._keys import IMPORTED_PREFIX
from thena_nb.core.records.report import ReportNode
from thena_nb.core.records.types import ToolCall, Turn
from thena_nb.core.runs._view import RunView

__all__ = ["Divergence", "DivergenceCause", "PairDifference", "RunDiff", "TurnPair"]

DivergenceCause = Literal["agent", "message", "reply", "tool_result", "stop", "steps"]
"""Why two runs part at their first divergence (see the module docstring)."""
PairDifference = Literal["request", "reply", "tool_results", "only_a", "only_b"]
"""What differs between two paired turns, or which run alone has the turn."""

_FROZEN = ConfigDict(frozen=True, extra="forbid", defer_build=True)
_LoopKey = tuple[str, tuple[int, ...]]
_Place = tuple[str, tuple[int, ...], int]
_SHORT = 60


class TurnPair(BaseModel):
    """Two turns that ran at the same place in two runs, or a turn that only one run has."""

    model_config = _FROZEN

    turn_a: int | None
    """The turn's index in run `a`; `None` when only run `b` has a turn here."""
    turn_b: int | None
    """The turn's index in run `b`; `None` when only run `a` has a turn here."""
    step_path: str
    """Where the turn ran (run `a`'s path when both have it)."""
    differs: tuple[PairDifference, ...] = ()
    """What differs: `"request"` (the request keys), `"reply"` (text or tool calls),
    `"tool_results"`; `("only_a",)` or `("only_b",)` for a turn only one run has."""
    reused: bool = False
    """One of the two turns was reused from a recording and both have the same reply and tool
    results: not a divergence, whatever their requests."""


class Divergence(BaseModel):
    """The first place two runs part: the turn in each run, where it ran, and why."""

    model_config = _FROZEN

    turn_a: int | None
    """The turn's index in run `a` (`None`: run `a` has no turn here)."""
    turn_b: int | None
    """The turn's index in run `b` (`None`: run `b` has no turn here)."""
    step_path: str
    cause: DivergenceCause
    detail: str
    """One sentence saying what differs, values shown as run `a`'s → run `b`'s."""
    changed: tuple[str, ...] = ()
    """What changed, by cause: the agent's fields (`"system"`, `"model"`, `"tools"`,
    `"max_tokens"`, `"history"`); the reply's parts (`"text"`, `"tool_calls"`); the tools
    whose results differ; the loop's facts (`"stop_reason"`, `"iterations"`,
    `"max_iterations"`, `"max_fails"`, `"until"`) or the run's `"status"`."""
    message: int | None = None
    """Cause `"message"`: the index in the history of the first message that differs."""


class RunDiff:
    """Two runs' turns aligned by where they ran, and the first divergence with its cause.

    Built by `run.diff(other)` (run `a` is `run`, run `b` is `other`) or
    `Experiment.diff(variant_a, variant_b, input=...)`.

    Attributes:
        a: The first run.
        b: The second run.
        pairs: One `TurnPair` per aligned pair, in the order the turns ran.
        first_divergence: Where and why the runs part, or `None` when they agree.

    Example:
        >>> from thena_nb import Agent, Workflow, loop, tool, until_answered
        >>> from thena_nb.models import ScriptedModel, reply
        >>> model = ScriptedModel([reply.tool("add", a=1, b=1)] * 2 + ["done"])
        >>> calc = Agent("Calc", model=model, tools=[tool(lambda a, b: a + b, name="add")])
        >>> wf = Workflow("sums", [loop(steps=[calc], until=until_answered)])
        >>> run = wf.run("go", store=False)
        >>> run.diff(wf.run("go", store=False)).first_divergence is None
        True
        >>> brief = {"Calc": {"model": ScriptedModel(["Two."]), "system": "Be brief."}}
        >>> d = run.diff(run.fork(1, changes=brief, store=False))
        >>> d.first_divergence.turn_a, d.first_divergence.cause, d.first_divergence.changed
        (1, 'agent', ('system',))
    """

    def __init__(self, a: RunView, b: RunView) -> None:
        self.a = a
        self.b = b
        self._layouts = (_Layout(a), _Layout(b))
        self.pairs: list[TurnPair] = _pairs(*self._layouts)
        self._at: int | None = None
        """The position in `pairs` of the first divergence."""
        self.first_divergence: Divergence | None = None
        search = _Search(self)
        for position, pair in enumerate(self.pairs):
            if pair.differs and not pair.reused:
                found = search.cause(pair)
                if found is not None:
                    self._at, self.first_divergence = position, found
                    break

    def turns(self, pair: TurnPair) -> tuple[Turn | None, Turn | None]:
        """The two turns of a pair (`None` for the run that has no turn there)."""
        la, lb = self._layouts
        return (
            la.by_index[pair.turn_a] if pair.turn_a is not None else None,
            lb.by_index[pair.turn_b] if pair.turn_b is not None else None,
        )

    @property
    def divergence_pair(self) -> int | None:
        """The position in `pairs` of the first divergence, or `None` when the runs agree."""
        return self._at

    def frame(self) -> Any:
        """The aligned pairs as a pandas DataFrame, one row per pair (needs pandas).

        Columns: `turn_a`, `turn_b`, `step_path`, `agent`, `iteration`, `differs` (what
        differs, joined with commas; missing when nothing does), `cause` (on the first
        divergence's row only), `reused`, `request_differs`, `reply_differs`,
        `tool_results_differ` (missing for a turn only one run has), `replayed_a`,
        `replayed_b`, `response_a`, `response_b`, `tool_calls_a`, `tool_calls_b`.
        """
        return _portals.diff_frame([self._row(i, p) for i, p in enumerate(self.pairs)])

    def _row(self, position: int, pair: TurnPair) -> dict[str, Any]:
        ta, tb = self.turns(pair)
        either = ta if ta is not None else tb
        assert either is not None
        both = ta is not None and tb is not None
        cause = (
            self.first_divergence.cause if position == self._at and self.first_divergence else None
        )
        return {
            "turn_a": pair.turn_a,
            "turn_b": pair.turn_b,
            "step_path": pair.step_path,
            "agent": either.agent,
            "iteration": either.iteration,
            "differs": ", ".join(pair.differs) or None,
            "cause": cause,
            "reused": pair.reused,
            "request_differs": "request" in pair.differs if both else None,
            "reply_differs": "reply" in pair.differs if both else None,
            "tool_results_differ": "tool_results" in pair.differs if both else None,
            "replayed_a": ta.replayed if ta is not None else None,
            "replayed_b": tb.replayed if tb is not None else None,
            "response_a": ta.info.response if ta is not None else None,
            "response_b": tb.info.response if tb is not None else None,
            "tool_calls_a": len(ta.tool_calls) if ta is not None else None,
            "tool_calls_b": len(tb.tool_calls) if tb is not None else None,
        }

    def _repr_html_(self) -> str:
        return _html.diff_html(self)

    def __repr__(self) -> str:
        head = f"RunDiff({self.a.run_id!r}, {self.b.run_id!r}, pairs={len(self.pairs)}"
        d = self.first_divergence
        if d is None:
            return f"{head}, the runs agree)"
        where = f"turn {_index(d.turn_a)} of a, {_index(d.turn_b)} of b"
        return f"{head}, first divergence at {where} ({d.step_path!r}): {d.cause}: {d.detail})"


def _index(value: int | None) -> str:
    return "none" if value is None else str(value)


# -- alignment -------------------------------------------------------------------------------


class _Layout:
    """Where each turn of one run ran (its place), and the loops around it."""

    def __init__(self, run: RunView) -> None:
        self.run = run
        self.turns: list[Turn] = sorted(run.turns, key=lambda t: t.index)
        self.by_index = {t.index: t for t in self.turns}
        self.loops: dict[_LoopKey, ReportNode] = {}
        self._where: dict[int, tuple[str, tuple[int, ...]]] = {}
        self.around: dict[int, tuple[_LoopKey, ...]] = {}
        self._visit(run.report, (), ())
        seen: dict[tuple[str, tuple[int, ...]], int] = {}
        self.places: list[_Place] = []
        for turn in self.turns:
            where = self._where.get(turn.index, (_relative(turn.step_path), ()))
            n = seen[where] = seen.get(where, -1) + 1
            self.places.append((*where, n))
        self.starts = [i for i, m in enumerate(run.history) if m.role == "assistant"]
        """Turn `k`'s messages start at the history's `k`-th assistant message."""

    def _visit(
        self, node: ReportNode, iterations: tuple[int, ...], loops: tuple[_LoopKey, ...]
    ) -> None:
        path = _relative(node.path)
        for index in node.turns:
            self._where[index] = (path, iterations)
            self.around[index] = loops
        if node.kind == "loop":
            key = (path, iterations)
            self.loops.setdefault(key, node)
            loops = (*loops, key)
        for child in node.children:
            inner = iterations
            if node.kind == "loop" and child.iteration is not None:
                inner = (*iterations, child.iteration)
            self._visit(child, inner, loops)

    def seen_before(self, index: int) -> int:
        """How many history messages came before turn `index`'s own."""
        return self.starts[index] if index < len(self.starts) else len(self.run.history)


def _relative(path: str) -> str:
    """A step path without the workflow's name, so that renamed workflows still pair."""
    return path.partition("/")[2]


def _pairs(la: _Layout, lb: _Layout) -> list[TurnPair]:
    """The two runs' turns paired by place, in the order they ran.

    A place that both runs have pairs its turns; a pair that would cross an earlier one
    (the same place in another order) is left as two lone turns, so the rows stay in the
    order of both runs.
    """
    where_b = {place: j for j, place in enumerate(lb.places)}
    match: list[int | None] = []
    last = -1
    for place in la.places:
        j = where_b.get(place)
        if j is not None and j > last:
            last = j
            match.append(j)
        else:
            match.append(None)
    out: list[TurnPair] = []
    i = j = 0
    na, nb = len(la.turns), len(lb.turns)
    while i < na or j < nb:
        if i < na and match[i] is not None and match[i] == j:
            out.append(_pair(la.turns[i], lb.turns[j]))
            i, j = i + 1, j + 1
        elif i < na and match[i] is None:
            ta = la.turns[i]
            out.append(
                TurnPair(turn_a=ta.index, turn_b=None, step_path=ta.step_path, differs=("only_a",))
            )
            i += 1
        else:
            tb = lb.turns[j]  # not paired: a paired turn of `b` waits for its partner
            out.append(
                TurnPair(turn_a=None, turn_b=tb.index, step_path=tb.step_path, differs=("only_b",))
            )
            j += 1
    return out


def _pair(ta: Turn, tb: Turn) -> TurnPair:
    differs: list[PairDifference] = []
    keys = (ta.request_key, tb.request_key)
    if _comparable(*keys) and keys[0] != keys[1]:
        differs.append("request")
    if _reply(ta) != _reply(tb):
        differs.append("reply")
    if _results(ta) != _results(tb):
        differs.append("tool_results")
    same_outcome = "reply" not in differs and "tool_results" not in differs
    return TurnPair(
        turn_a=ta.index,
        turn_b=tb.index,
        step_path=ta.step_path,
        differs=tuple(differs),
        reused=same_outcome and (ta.replayed or tb.replayed),
    )


def _comparable(a: str | None, b: str | None) -> bool:
    """Whether two request keys say anything by differing: both set (a hand-built turn may
    have none) and of one kind (a turn imported from a trace keys the history's content
    alone: `otel:...`, see `_replay.content_key`)."""
    if a is None or b is None:
        return False
    return a.startswith(IMPORTED_PREFIX) == b.startswith(IMPORTED_PREFIX)


def _reply(turn: Turn) -> tuple[str, list[tuple[str, str, dict[str, Any]]]]:
    """What the model answered: its text and its calls with the arguments *it* wrote (a
    gate's edit is what ran, not what the model said: `original_arguments`)."""
    return turn.info.response, [(c.name, c.source, _said(c)) for c in turn.tool_calls]


def _said(call: ToolCall) -> dict[str, Any]:
    original = call.original_arguments
    return call.arguments if original is None else original


def _ran(call: Any) -> tuple[bool | None, str | None, str | None, dict[str, Any] | None]:
    """What a call did: its outcome, and the arguments it ran with when a gate edited them."""
    edited = None if call.original_arguments is None else call.arguments
    return call.ok, call.result, call.error, edited


def _results(turn: Turn) -> list[tuple[bool | None, str | None, str | None, Any]]:
    return [_ran(c) for c in turn.tool_calls]


# -- causes ----------------------------------------------------------------------------------


class _Search:
    """The cause of each pair that differs, in order, until one is a divergence.

    The two histories are compared once, as far as the turns have seen them: `checked`
    leading messages are known to agree. Messages that agree but for their tool-call ids
    (a live model gives every call a new id) set `ids_differ`: such ids alone change the
    request keys, so they do not make a divergence.
    """

    def __init__(self, diff: RunDiff) -> None:
        self.diff = diff
        self.checked = 0
        self.ids_differ = False

    def cause(self, pair: TurnPair) -> Divergence | None:
        """Why the pair differs, or `None` when it differs only in tool-call ids."""
        ta, tb = self.diff.turns(pair)
        if ta is None or tb is None:
            return _lone_turn(self.diff, pair)
        if "request" in pair.differs:
            found = self._request(pair, ta, tb)
            if found is not None:
                return found
        if "reply" in pair.differs:
            return _reply_cause(pair, ta, tb)
        if "tool_results" in pair.differs:
            return _tool_result_cause(pair, ta, tb)
        return None

    def _request(self, pair: TurnPair, ta: Turn, tb: Turn) -> Divergence | None:
        """The requests differ: in the history the turn saw (`"message"`), else in what the
        agent sends besides it (`"agent"`), else only in tool-call ids (`None`)."""
        la, lb = self.diff._layouts
        seen_a, seen_b = la.seen_before(ta.index), lb.seen_before(tb.index)
        ha, hb = self.diff.a.history, self.diff.b.history
        for j in range(self.checked, min(seen_a, seen_b)):
            ma, mb = ha[j], hb[j]
            if ma == mb:
                continue
            if _content(ma) != _content(mb):
                return _message_cause(pair, j, ma, mb)
            self.ids_differ = True
        self.checked = max(self.checked, min(seen_a, seen_b))
        if seen_a != seen_b:
            j = min(seen_a, seen_b)
            extra = ha[j] if seen_a > seen_b else hb[j]
            more = "a" if seen_a > seen_b else "b"
            detail = f"turn {ta.index} saw {seen_a} messages in run a and {seen_b} in run b"
            detail += f"; run {more} has a {extra.role} message {_short(extra.content)!r} more"
            return _made(pair, "message", detail, message=j)
        changed, said = _agent_changes(self.diff, ta, tb)
        if self.ids_differ and not changed:
            return None  # the call ids tell the keys apart; nothing shows the agent changed
        detail = f"agent {ta.agent!r} asked otherwise from the same history"
        detail += f": {said}" if said else " (its system prompt, model, tools or output limit)"
        return _made(pair, "agent", detail, changed)


def _content(m: Any) -> tuple[Any, ...]:
    """A message without its tool-call ids."""
    calls = [(c.name, c.source, c.arguments) for c in m.tool_calls]
    return m.role, m.agent, m.content, m.is_error, calls


def _message_cause(pair: TurnPair, j: int, ma: Any, mb: Any) -> Divergence:
    if j == 0:
        what = "the input"
    elif ma.role == "tool":
        what = "a tool result"
    elif ma.role == "assistant":
        what = f"a reply of {ma.agent!r}"
    else:
        what = f"a {ma.role} message"
    if ma.content != mb.content:
        shown = f"{_short(ma.content)!r} → {_short(mb.content)!r}"
    else:
        shown = f"the same text, with other {_message_fields(ma, mb)}"
    return _made(
        pair, "message", f"message {j} of the history ({what}) differs: {shown}", message=j
    )


def _message_fields(ma: Any, mb: Any) -> str:
    names = [k for k in ("role", "agent", "is_error") if getattr(ma, k) != getattr(mb, k)]
    if _content(ma)[4] != _content(mb)[4]:
        names.append("tool calls")
    return ", ".join(names) or "fields"


def _agent_changes(diff: RunDiff, ta: Turn, tb: Turn) -> tuple[tuple[str, ...], str]:
    """Which of the agent's fields differ (from the two runs' workflows), and as words."""
    facts_a = _agent_facts(diff.a, ta.step_path)
    facts_b = _agent_facts(diff.b, tb.step_path)
    if facts_a is None or facts_b is None:
        if ta.model != tb.model:
            return ("model",), f"model {ta.model!r} → {tb.model!r}"
        return (), ""
    changed = tuple(k for k in facts_a if facts_a[k] != facts_b[k])
    words = []
    for key in changed:
        if key == "tools":
            names_a, names_b = ([t["name"] for t in f["tools"]] for f in (facts_a, facts_b))
            shown = f"{names_a} → {names_b}" if names_a != names_b else "(descriptions or schemas)"
            words.append(f"tools {shown}")
        else:
            label = "system prompt" if key == "system" else key
            words.append(f"{label} {_short(facts_a[key])!r} → {_short(facts_b[key])!r}")
    return changed, "; ".join(words)


def _agent_facts(run: RunView, path: str) -> dict[str, Any] | None:
    """What an agent's part of a request key is made of, from the run's workflow."""
    step = _step_at(run, path)
    if step is None or getattr(step, "kind", None) != "agent":
        return None
    model = step.model
    return {
        "system": step.system,
        "model": getattr(model, "name", type(model).__name__),
        "tools": [t.spec.model_dump(mode="json") for t in step.tools],
        "max_tokens": step.max_tokens,
        "history": callable_name(step.history) if step.history is not None else None,
    }


def _step_at(run: RunView, path: str) -> Any:
    workflow = run.workflow
    if workflow is None:
        return None
    for found, step in walk(workflow.steps, workflow.name):
        if found == path:
            return step
    return None


def _reply_cause(pair: TurnPair, ta: Turn, tb: Turn) -> Divergence:
    """The same request got another reply."""
    parts, words = [], []
    if ta.info.response != tb.info.response:
        parts.append("text")
        words.append(f"text {_short(ta.info.response)!r} → {_short(tb.info.response)!r}")
    calls_a, calls_b = _reply(ta)[1], _reply(tb)[1]
    if calls_a != calls_b:
        parts.append("tool_calls")
        words.append(f"tool calls {_calls(ta)} → {_calls(tb)}")
    detail = f"the model answered the same request otherwise: {'; '.join(words)}"
    return _made(pair, "reply", detail, tuple(parts))


def _tool_result_cause(pair: TurnPair, ta: Turn, tb: Turn) -> Divergence:
    """The same calls returned something else."""
    names: list[str] = []
    first = ""
    for ca, cb in zip(ta.tool_calls, tb.tool_calls, strict=True):
        if _ran(ca) == _ran(cb):
            continue
        if ca.name not in names:
            names.append(ca.name)
        if not first and _ran(ca)[3] != _ran(cb)[3]:
            first = f"a gate edited the call otherwise: {_call(ca)} → {_call(cb)}"
        elif not first:
            first = f"{_call(ca)} returned {_outcome(ca)} → {_outcome(cb)}"
    return _made(pair, "tool_result", f"the same call gave another result: {first}", tuple(names))


def _lone_turn(diff: RunDiff, pair: TurnPair) -> Divergence:
    """A turn only one run has: a loop around it stopped otherwise, or the runs ran other
    steps (or the shorter one ended)."""
    has_a = pair.turn_a is not None
    longer, shorter = diff._layouts if has_a else diff._layouts[::-1]
    index = pair.turn_a if has_a else pair.turn_b
    assert index is not None
    other = "b" if has_a else "a"
    for key in reversed(longer.around.get(index, ())):
        mine, theirs = longer.loops[key], shorter.loops.get(key)
        if theirs is None:
            continue  # that loop never ran this time in the other run: look further out
        if theirs.stop_reason is None:
            break  # an error ended it, or it is still running: the run's status tells
        node_a, node_b = (mine, theirs) if has_a else (theirs, mine)
        changed = _loop_changes(diff, node_a, node_b)
        if "stop_reason" in changed or "iterations" in changed:
            detail = f"loop {node_a.path!r} stopped sooner in run {other}: " + _loop_words(
                node_a, node_b, changed
            )
            return _made(pair, "stop", detail, changed)
    ended = shorter.run
    lone = f"turn {index} of run {'a' if has_a else 'b'} has no counterpart in run {other}"
    if ended.status in ("budget", "stopped") and ended.status != longer.run.status:
        detail = f"{lone}: run {other} ended with status {ended.status!r}"
        return _made(pair, "stop", detail, ("status",))
    if ended.status in ("failed", "running"):
        why = f"; its error: {_short(ended.error, 200)}" if ended.error else ""
        return _made(pair, "steps", f"{lone}: run {other} is {ended.status!r}{why}", ("status",))
    return _made(pair, "steps", f"{lone}: the two runs ran other steps")


def _loop_changes(diff: RunDiff, node_a: ReportNode, node_b: ReportNode) -> tuple[str, ...]:
    changed = [
        k
        for k in ("stop_reason", "iterations", "max_iterations", "max_fails")
        if getattr(node_a, k) != getattr(node_b, k)
    ]
    step_a = _step_at(diff.a, node_a.path)
    step_b = _step_at(diff.b, node_b.path)
    loops = getattr(step_a, "kind", None) == getattr(step_b, "kind", None) == "loop"
    if loops and step_a.until is not step_b.until:
        changed.append("until")
    return tuple(changed)


def _loop_words(node_a: ReportNode, node_b: ReportNode, changed: Sequence[str]) -> str:
    def stopped(node: ReportNode) -> str:
        reason = node.stop_reason or "an error"
        return f"{node.iterations} iteration{'s' if node.iterations != 1 else ''} ({reason})"

    words = [f"{stopped(node_a)} in run a, {stopped(node_b)} in run b"]
    for key in ("max_iterations", "max_fails"):
        if key in changed:
            words.append(f"{key} {getattr(node_a, key)!r} → {getattr(node_b, key)!r}")
    if "until" in changed:
        words.append("another `until`")
    return "; ".join(words)


def _made(
    pair: TurnPair,
    cause: DivergenceCause,
    detail: str,
    changed: tuple[str, ...] = (),
    *,
    message: int | None = None,
) -> Divergence:
    return Divergence(
        turn_a=pair.turn_a,
        turn_b=pair.turn_b,
        step_path=pair.step_path,
        cause=cause,
        detail=detail,
        changed=changed,
        message=message,
    )


# -- words -----------------------------------------------------------------------------------


def _short(text: Any, limit: int = _SHORT) -> str:
    value = "" if text is None else str(text)
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _call(call: Any) -> str:
    args = ", ".join(
        f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in call.arguments.items()
    )
    return _short(f"{call.name}({args})")


def _calls(turn: Turn) -> str:
    return "[" + ", ".join(_call(c) for c in turn.tool_calls) + "]"


def _outcome(call: Any) -> str:
    if call.ok is False:
        return f"error {_short(call.error)!r}"
    return repr(_short(call.result))
