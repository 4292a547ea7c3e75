"""Scorers: what a run is judged by. `Score`, the built-in checks and the LLM judge.

A scorer is any function `fn(run, case)` that returns a `bool` (pass or fail), a number, or
a `Score` (a value and its explanation); it may also be async (a coroutine function), as the
judge is. The built-ins below are small named objects with a readable repr; their `name` is
the column they fill in `exp.frame()`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypeAlias, get_args

from thena_nb.core.records.errors import TransientModelError
from thena_nb.core.records.model import Model, ModelRequest, Reply, ToolSpec
from thena_nb.core.records.types import LoopStopReason, Message, RetryPolicy
from thena_nb.core.runs.run import Run
from thena_nb.experiments.cases import Case

__all__ = [
    "Check",
    "Judge",
    "Score",
    "ScoreValue",
    "Scorer",
    "TrajectoryMode",
    "contains",
    "equals",
    "judge",
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


def _output_text(run: Run) -> str:
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
        output = _output_text(run)
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
        return re.search(pattern, _output_text(run)) is not None

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


# -- the judge ----------------------------------------------------------------------------

JUDGE_SYSTEM = (
    "You grade the output of an AI agent against a rubric. Read the task, the expected "
    "answer when there is one, the tool calls and the output. Then call the `score` tool "
    "once, with `score` (true or false for pass or fail, or a number when the rubric asks "
    "for one) and a short `explanation`. Without tools, answer with only the JSON object "
    '{"score": ..., "explanation": "..."}.\n\nRubric:\n'
)
"""The judge's system prompt; the rubric follows it."""

_SCORE_TOOL = ToolSpec(
    name="score",
    description="Record the grade of the output.",
    parameters={
        "type": "object",
        "properties": {
            "score": {"type": ["boolean", "number"]},
            "explanation": {"type": "string"},
        },
        "required": ["score", "explanation"],
    },
)


class Judge:
    """An LLM judge: asks `model` to grade each run against `rubric` (see `judge`)."""

    explains = True
    """A judge's explanations get a column of their own, `<name>_explanation`."""

    def __init__(
        self,
        model: Model,
        rubric: str,
        *,
        name: str,
        max_tokens: int,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.model = model
        self.rubric = rubric
        self.name = name
        self.max_tokens = max_tokens
        self.retry = retry if retry is not None else RetryPolicy()

    def request(self, run: Run, case: Case) -> ModelRequest:
        """What the judge sends the model about `run`."""
        return ModelRequest(
            agent=self.name,
            system=JUDGE_SYSTEM + self.rubric,
            messages=[Message(role="user", content=_judge_prompt(run, case))],
            tools=[_SCORE_TOOL],
            max_tokens=self.max_tokens,
        )

    async def __call__(self, run: Run, case: Case) -> Score:
        """The model's grade of `run`, with its explanation.

        Raises:
            ValueError: The reply held no score.
            ModelError: The model call failed, for good or after every retry.
        """
        return _parse_grade(await self._ask(self.request(run, case)))

    async def _ask(self, request: ModelRequest) -> Reply:
        """The model's reply; a transient error (a rate limit, an overload, a reset) is
        retried under `retry`, as the executor retries a turn's model call (S25)."""
        policy = self.retry
        attempt = 0
        while True:
            attempt += 1
            try:
                reply: Reply = await self.model.respond(request)
                return reply
            except TransientModelError as exc:
                if attempt > policy.max_retries:
                    exc.add_note(f"gave up after {attempt} attempts")
                    raise
                await asyncio.sleep(policy.delay(attempt, exc.retry_after, random.random()))

    def __repr__(self) -> str:
        extra = f", name={self.name!r}" if self.name != "judge" else ""
        if self.retry != RetryPolicy():
            extra += f", retry={self.retry!r}"
        return f"judge({self.model!r}, {self.rubric!r}{extra})"


def judge(
    model: Model,
    rubric: str,
    *,
    name: str = "judge",
    max_tokens: int = 1024,
    retry: RetryPolicy | None = None,
) -> Judge:
    """An LLM judge through any thena_nb model: a score and its explanation for each run.

    The model is sent the rubric, the case's input and `expected` (when set), the run's tool
    calls and its output, and a `score` tool to call with `score` and `explanation`; a reply
    with the JSON object `{"score": ..., "explanation": ...}` in its text does too. A score
    of `true`/`false` is pass/fail, a number is a number (the rubric sets the scale). A reply
    without a score is a scorer error for that run (the `scorer_error` column).

    A rate limit or another transient model error (`TransientModelError`: 429, 5xx, a reset
    connection) is retried with backoff under `retry`, as a workflow retries its model calls;
    only an error that is final, or still there after the last retry, is a scorer error.

    Args:
        model: Any `Model`: `AnthropicModel`, or offline `FunctionModel` / `ScriptedModel`.
        rubric: What a good output is.
        name: The scorer's column name (its explanations go to `<name>_explanation`).
        max_tokens: The judge's reply limit.
        retry: How transient errors are retried (`RetryPolicy()`, a workflow's default,
            when not given).

    Returns:
        The scorer (async: awaiting `scorer(run, case)` gives a `Score`).

    Example:
        >>> import asyncio
        >>> from thena_nb import Agent, Case, Workflow
        >>> from thena_nb.models import FunctionModel, ScriptedModel, reply
        >>> from thena_nb.scorers import judge
        >>> run = Workflow("w", [Agent("A", model=ScriptedModel(["Paris"]))]).run("x", store=False)
        >>> def grader(request):
        ...     ok = "Paris" in request.messages[0].content
        ...     return reply.tool("score", score=ok, explanation="names the capital")
        >>> asyncio.run(judge(FunctionModel(grader), "Names the capital.")(run, Case("x")))
        Score(value=True, explanation='names the capital')
    """
    return Judge(model, rubric, name=name, max_tokens=max_tokens, retry=retry)


def _judge_prompt(run: Run, case: Case) -> str:
    parts = [f"Task:\n{case.text}"]
    if case.expected is not None:
        parts.append(f"Expected:\n{case.expected}")
    calls = [c for t in run.turns for c in t.tool_calls]
    if calls:
        lines = [
            f"- {c.name}({json.dumps(c.arguments, sort_keys=True, default=str)})"
            f"{'' if c.ok is not False else ' (failed)'}"
            for c in calls
        ]
        parts.append("Tool calls:\n" + "\n".join(lines))
    parts.append(f"Run status: {run.status}")
    parts.append(f"Output:\n{_output_text(run)}")
    return "\n\n".join(parts)


def _parse_grade(reply: Reply) -> Score:
    for call in reply.tool_calls:
        if call.name == _SCORE_TOOL.name:
            return _grade(call.arguments, reply)
    start = reply.text.find("{")
    while start != -1:
        try:
            found, _ = json.JSONDecoder().raw_decode(reply.text, start)
        except ValueError:
            found = None
        if isinstance(found, dict) and "score" in found:
            return _grade(found, reply)
        start = reply.text.find("{", start + 1)
    raise ValueError(f"the judge's reply holds no score: {reply.text[:200]!r}")


def _grade(found: Mapping[str, Any], reply: Reply) -> Score:
    value = found.get("score")
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "pass", "fail"):
        value = value.strip().lower() in ("true", "pass")
    if not isinstance(value, bool | int | float):
        raise ValueError(f"the judge's score is not true/false or a number: {value!r}")
    explanation = found.get("explanation")
    if explanation is None:
        explanation = reply.text or None
    return Score(value if isinstance(value, bool) else float(value), _text_or_none(explanation))


def _text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)
