"""Scorers: what a run is judged by. `Score` and the built-in checks (the LLM judge is
`_judge`).

A scorer is any function `fn(run, case)` that returns a `bool` (pass or fail), a number, or
a `Score` (a value and its explanation); it may also be async (a coroutine function), as the
judge is. The built-ins below are small named objects with a readable repr; their `name` is
the column they fill in `exp.frame()`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypeAlias, get_args

from thena_nb.core.records.types import LoopStopReason
from thena_nb.core.runs.run import Run
from thena_nb.experiments.cases import Case

__all__ = [
    "Check",
    "Score",
    "ScoreValue",
    "Scorer",
    "TrajectoryMode",
    "contains",
    "equals",
    "matches",
    "max_turns",
    "no_failed_tools",
    "stop_reason",
    "tool_trajectory",
]

ScoreValue: TypeAlias = bool | float
"""A pass/fail result or a number."""


@dataclasses.dataclass(frozen=True)
class Score:
    """What a scorer gives for one run: a value and, optionally, why.

    Args:
        value: `True`/`False` for pass/fail, or a number.
        explanation: Why the run got this value (a judge's reasoning, say).

    Example:
        >>> from thena_nb.scorers import Score
        >>> Score(0.75, "Right answer, but it looked the flight up twice.")
        Score(value=0.75, explanation='Right answer, but it looked the flight up twice.')
    """

    value: bool | float
    explanation: str | None = None


Scorer: TypeAlias = Callable[[Run, Case], ScoreValue | Score | Awaitable[ScoreValue | Score]]
"""`fn(run, case)` giving a `bool`, a number or a `Score`, or an awaitable of one."""

TrajectoryMode = Literal["exact", "in_order", "any_order"]


class Check:
    """A built-in pass/fail scorer: a named check of a run and its case.

    Args:
        name: The scorer's column in `exp.frame()`.
        check: `check(run, case) -> bool`.
        label: The repr, e.g. `"contains('Paris')"`.
    """

    def __init__(self, name: str, check: Callable[[Run, Case], bool], label: str) -> None:
        self.name = name
        self._check = check
        self._label = label

    def __call__(self, run: Run, case: Case) -> bool:
        """Whether `run` passes the check."""
        return self._check(run, case)

    def __repr__(self) -> str:
        return self._label


def _label(kind: str, *args: Any, name: str | None = None, **options: Any) -> str:
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in options.items()]
    if name is not None and name != kind:
        parts.append(f"name={name!r}")
    return f"{kind}({', '.join(parts)})"


def output_text(run: Run) -> str:
    """The run's output as the checks and the judge read it: its text, `""` when none."""
    output = run.output
    if output is None:
        return ""
    return output if isinstance(output, str) else str(output)


def _expected(given: Any, case: Case, scorer: str) -> Any:
    """`given`, or the case's `expected` when nothing was given."""
    if given is not None:
        return given
    if case.expected is None:
        raise ValueError(
            f"`{scorer}` has nothing to compare with: give it a value, or give the case one "
            f"(`Case(input, expected=...)`)"
        )
    return case.expected


# -- on the output ------------------------------------------------------------------------


def equals(expected: Any = None, *, name: str = "equals") -> Check:
    """Pass when the run's output equals `expected` (`==`).

    Args:
        expected: The value to compare with; by default the case's `expected`.
        name: The scorer's column name.

    Returns:
        The scorer.

    Example:
        >>> from thena_nb import Agent, Case, Workflow
        >>> from thena_nb.models import ScriptedModel
        >>> from thena_nb.scorers import equals
        >>> run = Workflow("w", [Agent("A", model=ScriptedModel(["4"]))]).run("2+2?", store=False)
        >>> equals()(run, Case("2+2?", expected="4")), equals("5")(run, Case("2+2?"))
        (True, False)
    """
    shown = () if expected is None else (expected,)
    return Check(
        name,
        lambda run, case: run.output == _expected(expected, case, name),
        _label("equals", *shown, name=name),
    )


def contains(
    text: str | None = None, *, case_sensitive: bool = False, name: str = "contains"
) -> Check:
    """Pass when the run's output contains `text` (like `until_text`, case-insensitive).

    Args:
        text: The text to look for; by default the case's `expected`.
        case_sensitive: Tell upper and lower case apart.
        name: The scorer's column name.

    Returns:
        The scorer.

    Example:
        >>> from thena_nb import Agent, Case, Workflow
        >>> from thena_nb.models import ScriptedModel
        >>> from thena_nb.scorers import contains
        >>> wf = Workflow("w", [Agent("A", model=ScriptedModel(["It is Paris."]))])
        >>> contains("paris")(wf.run("Capital of France?", store=False), Case("x"))
        True
    """

    def check(run: Run, case: Case) -> bool:
        wanted = str(_expected(text, case, name))
        output = output_text(run)
        if not case_sensitive:
            wanted, output = wanted.casefold(), output.casefold()
        return wanted in output

    shown = () if text is None else (text,)
    options = {"case_sensitive": True} if case_sensitive else {}
    return Check(name, check, _label("contains", *shown, name=name, **options))


def matches(regex: str | re.Pattern[str] | None = None, *, name: str = "matches") -> Check:
    """Pass when `regex` matches somewhere in the run's output (`re.search`).

    Args:
        regex: The pattern (a string or a compiled pattern, with its flags); by default the
            case's `expected`.
        name: The scorer's column name.

    Returns:
        The scorer.

    Example:
        >>> from thena_nb import Agent, Case, Workflow
        >>> from thena_nb.models import ScriptedModel
        >>> from thena_nb.scorers import matches
        >>> wf = Workflow("w", [Agent("A", model=ScriptedModel(["Total: 42 EUR"]))])
        >>> matches(r"\\d+ EUR")(wf.run("Price?", store=False), Case("x"))
        True
    """
    given = None if regex is None else re.compile(regex)

    def check(run: Run, case: Case) -> bool:
        pattern = _expected(given, case, name)
        return re.search(pattern, output_text(run)) is not None

    shown = () if regex is None else (regex if isinstance(regex, str) else regex.pattern,)
    return Check(name, check, _label("matches", *shown, name=name))


# -- on how the run went ------------------------------------------------------------------

_STOP_REASONS: tuple[str, ...] = get_args(LoopStopReason)


def stop_reason(
    *reasons: LoopStopReason, loop: str | None = None, name: str = "stop_reason"
) -> Check:
    """Pass when a loop of the run stopped for one of `reasons`.

    Args:
        reasons: Stop reasons (`"until"`, `"exhausted"`, `"fails"`, `"budget"`, `"stop"`).
        loop: The step path of the loop to look at (e.g. `"review/0.loop"`); by default any
            loop of the run will do.
        name: The scorer's column name.

    Returns:
        The scorer.

    Raises:
        ValueError: No reason, or one that is not a stop reason.

    Example:
        >>> from thena_nb import Agent, Case, Workflow, loop, until_answered
        >>> from thena_nb.models import ScriptedModel
        >>> from thena_nb.scorers import stop_reason
        >>> agent = Agent("A", model=ScriptedModel(["done"]))
        >>> run = Workflow("w", [loop(steps=[agent], until=until_answered)]).run("go", store=False)
        >>> stop_reason("until")(run, Case("go")), stop_reason("exhausted")(run, Case("go"))
        (True, False)
    """
    if not reasons:
        raise ValueError(f"`stop_reason` needs at least one of {_STOP_REASONS!r}")
    for reason in reasons:
        if reason not in _STOP_REASONS:
            raise ValueError(f"{reason!r} is not a stop reason; use one of {_STOP_REASONS!r}")

    def check(run: Run, case: Case) -> bool:
        found = run.stop_reasons
        if loop is None:
            return any(r in reasons for r in found.values())
        if loop not in found:
            raise ValueError(f"the run has no loop {loop!r}; its loops: {list(found)!r}")
        return found[loop] in reasons

    options = {"loop": loop} if loop is not None else {}
    return Check(name, check, _label("stop_reason", *reasons, name=name, **options))


def max_turns(n: int, *, name: str = "max_turns") -> Check:
    """Pass when the run took at most `n` turns (model calls).

    Args:
        n: The most turns allowed.
        name: The scorer's column name.

    Returns:
        The scorer.

    Example:
        >>> from thena_nb import Agent, Case, Workflow
        >>> from thena_nb.models import ScriptedModel
        >>> from thena_nb.scorers import max_turns
        >>> run = Workflow("w", [Agent("A", model=ScriptedModel(["hi"]))]).run("x", store=False)
        >>> max_turns(1)(run, Case("x")), max_turns(0)(run, Case("x"))
        (True, False)
    """
    return Check(name, lambda run, case: len(run.turns) <= n, _label("max_turns", n, name=name))


def no_failed_tools(*, name: str = "no_failed_tools") -> Check:
    """Pass when none of the run's tool calls failed.

    Args:
        name: The scorer's column name.

    Returns:
        The scorer.

    Example:
        >>> from thena_nb import Agent, Case, Workflow
        >>> from thena_nb.models import ScriptedModel
        >>> from thena_nb.scorers import no_failed_tools
        >>> run = Workflow("w", [Agent("A", model=ScriptedModel(["hi"]))]).run("x", store=False)
        >>> no_failed_tools()(run, Case("x"))
        True
    """

    def check(run: Run, case: Case) -> bool:
        return all(c.ok is not False for t in run.turns for c in t.tool_calls)

    return Check(name, check, _label("no_failed_tools", name=name))


# -- tool trajectory ----------------------------------------------------------------------

_Call = tuple[str, Mapping[str, Any] | None]
"""An expected call: a name, and the arguments it must have (`None`: any)."""
_Made = tuple[str, Mapping[str, Any]]
"""A call the run made: its name and arguments."""


def tool_trajectory(
    calls: Sequence[str | tuple[str, Mapping[str, Any]]],
    mode: TrajectoryMode = "exact",
    *,
    name: str = "tool_trajectory",
) -> Check:
    """Pass when the run's tool calls follow `calls`.

    A call is a tool name, or `(name, arguments)`: then each argument given must have that
    value (arguments not given may be anything). The run's calls are all its tool calls in
    order, failed ones included.

    Args:
        calls: The expected calls.
        mode: `"exact"`: the run made exactly these calls, in this order. `"in_order"`:
            these calls appear in this order, maybe with others between them.
            `"any_order"`: each of these calls was made (a call made once counts once), in
            any order, maybe with others.
        name: The scorer's column name.

    Returns:
        The scorer.

    Raises:
        ValueError: An unknown `mode`, or a call that is neither a name nor a pair.

    Example:
        >>> from thena_nb import Agent, Case, Workflow, loop, tool, until_answered
        >>> from thena_nb.models import ScriptedModel, reply
        >>> from thena_nb.scorers import tool_trajectory
        >>> @tool
        ... def search(q: str) -> str:
        ...     "Search."
        ...     return "found"
        >>> model = ScriptedModel([reply.tool("search", q="a"), reply.tool("search", q="b"), "ok"])
        >>> agent = Agent("A", model=model, tools=[search])
        >>> run = Workflow("w", [loop(steps=[agent], until=until_answered)]).run("x", store=False)
        >>> tool_trajectory(["search", "search"])(run, Case("x"))
        True
        >>> tool_trajectory([("search", {"q": "b"})], "in_order")(run, Case("x"))
        True
        >>> tool_trajectory([("search", {"q": "c"})], "any_order")(run, Case("x"))
        False
    """
    if mode not in get_args(TrajectoryMode):
        raise ValueError(f"`mode` must be one of {get_args(TrajectoryMode)!r}, got {mode!r}")
    wanted = [_as_call(c) for c in calls]
    follows = _MODES[mode]

    def check(run: Run, case: Case) -> bool:
        made: list[_Made] = [(c.name, c.arguments) for t in run.turns for c in t.tool_calls]
        return follows(wanted, made)

    shown = [c if isinstance(c, str) else (c[0], dict(c[1])) for c in calls]
    options = {"mode": mode} if mode != "exact" else {}
    return Check(name, check, _label("tool_trajectory", shown, name=name, **options))


def _as_call(call: Any) -> _Call:
    if isinstance(call, str):
        return (call, None)
    if isinstance(call, tuple) and len(call) == 2 and isinstance(call[1], Mapping):
        return (str(call[0]), call[1])
    raise ValueError(f"a call is a tool name or `(name, arguments)`, got {call!r}")


def _is(made: _Made, wanted: _Call) -> bool:
    name, arguments = wanted
    if made[0] != name:
        return False
    return arguments is None or all(k in made[1] and made[1][k] == v for k, v in arguments.items())


def _exact(wanted: list[_Call], made: list[_Made]) -> bool:
    return len(wanted) == len(made) and all(map(_is, made, wanted))


def _in_order(wanted: list[_Call], made: list[_Made]) -> bool:
    # Matching each wanted call to the earliest call that fits leaves the most calls for
    # the rest, so this greedy walk finds a subsequence whenever there is one.
    position = 0
    for call in made:
        if position < len(wanted) and _is(call, wanted[position]):
            position += 1
    return position == len(wanted)


def _any_order(wanted: list[_Call], made: list[_Made]) -> bool:
    """A matching of every wanted call to a call of its own (augmenting paths, Kuhn's
    algorithm): `("a", {})` and `("a", {"q": 1})` must not both take the same call."""
    owner: dict[int, int] = {}  # made index -> wanted index

    def place(w: int, seen: set[int]) -> bool:
        for m, call in enumerate(made):
            if m not in seen and _is(call, wanted[w]):
                seen.add(m)
                if m not in owner or place(owner[m], seen):
                    owner[m] = w
                    return True
        return False

    return all(place(w, set()) for w in range(len(wanted)))


_MODES: dict[str, Callable[[list[_Call], list[_Made]], bool]] = {
    "exact": _exact,
    "in_order": _in_order,
    "any_order": _any_order,
}
