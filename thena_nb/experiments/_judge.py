"""The LLM judge: a scorer that asks a model to grade each run against a rubric.

`judge(model, rubric)` makes one (`Judge`); it sends the rubric, the case, the run's tool
calls and output, and a `score` tool, and reads the grade from the tool call or from a JSON
object in the reply's text. Transient model errors are retried as a workflow retries them.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Mapping
from typing import Any

from thena_nb.core.records.errors import TransientModelError
from thena_nb.core.records.model import Model, ModelRequest, Reply, ToolSpec
from thena_nb.core.records.types import Message, RetryPolicy
from thena_nb.core.runs.run import Run
from thena_nb.experiments._scorers import Score, output_text
from thena_nb.experiments.cases import Case

__all__ = ["JUDGE_SYSTEM", "Judge", "judge"]

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
    parts.append(f"Output:\n{output_text(run)}")
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
