"""The judge retries rate limits and other transient model errors under its retry policy
(as a workflow retries its model calls, S25); only a final error is a `scorer_error`."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from messages_api_server import MessagesAPIServer, status, tool_use

from thena_nb import Agent, Case, Workflow
from thena_nb.core.records.errors import ModelError, TransientModelError
from thena_nb.experiments import _judge
from thena_nb.models import (
    AnthropicModel,
    FunctionModel,
    ModelRequest,
    RetryPolicy,
    ScriptedModel,
    reply,
)
from thena_nb.scorers import Score, judge

FAST = RetryPolicy(initial_delay=0.001, jitter=False)


def answered() -> Workflow:
    return Workflow("w", [Agent("A", model=ScriptedModel(["Paris"]))])


def failing(*errors: Exception) -> FunctionModel:
    """A judge model that raises `errors` one by one, then passes every run."""
    left = list(errors)

    def grade(request: ModelRequest) -> Any:
        if left:
            raise left.pop(0)
        return reply.tool("score", score=True, explanation="names Paris")

    return FunctionModel(grade)


def busy() -> TransientModelError:
    return TransientModelError("rate limited", status_code=429, retry_after=0.0)


def test_a_judge_that_is_rate_limited_twice_then_answers_scores_the_run() -> None:
    model = failing(busy(), TransientModelError("overloaded", status_code=529))
    exp = answered().map(
        ["France?"], scorers=[judge(model, "Names the capital.", retry=FAST)],
        store=False, progress=False,
    )  # fmt: skip
    row = exp.frame().iloc[0]
    assert row["judge"] == True  # noqa: E712 - a numpy bool
    assert row["judge_explanation"] == "names Paris"
    assert pd.isna(row["scorer_error"])
    assert len(model.requests) == 3  # two refused, the third answered


def test_a_scripted_judge_retries_its_transient_errors() -> None:
    model = ScriptedModel(
        [
            reply.error(busy()),
            reply.error(TransientModelError("connection reset")),
            reply.tool("score", score=0.5, explanation="half right"),
        ]
    )
    run = answered().run("France?", store=False)
    score = asyncio.run(judge(model, "r", retry=FAST)(run, Case("France?")))
    assert score == Score(0.5, "half right")
    assert len(model.requests) == 3


def test_a_final_error_is_a_scorer_error_at_once() -> None:
    model = failing(ModelError("invalid request", status_code=400))
    exp = answered().map(
        ["France?"], scorers=[judge(model, "r", retry=FAST)], store=False, progress=False
    )
    row = exp.frame().iloc[0]
    assert pd.isna(row["judge"])
    assert row["scorer_error"] == "judge: ModelError: invalid request"
    assert len(model.requests) == 1  # not retried


def test_a_transient_error_that_lasts_is_a_scorer_error_after_the_last_retry() -> None:
    model = failing(*[busy() for _ in range(10)])
    policy = RetryPolicy(max_retries=2, initial_delay=0.001, jitter=False)
    exp = answered().map(
        ["France?"], scorers=[judge(model, "r", retry=policy)], store=False, progress=False
    )
    assert exp.frame().iloc[0]["scorer_error"] == "judge: TransientModelError: rate limited"
    assert len(model.requests) == 3  # the first attempt and two retries


def test_the_judge_waits_as_the_policy_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """The waits are the policy's backoff, or a server's `retry_after` when it is longer
    (recorded instead of slept, so no clock is read)."""
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(_judge, "asyncio", SimpleNamespace(sleep=sleep))
    model = failing(busy(), TransientModelError("later", retry_after=0.2))
    policy = RetryPolicy(initial_delay=0.05, jitter=False)
    run = answered().run("France?", store=False)
    score = asyncio.run(judge(model, "r", retry=policy)(run, Case("France?")))
    assert score.value is True
    assert waits == [0.05, 0.2]  # the first backoff; then the server's 0.2 s over 0.1 s


def test_a_judge_has_a_workflows_default_policy_and_shows_another() -> None:
    model = ScriptedModel(["{}"])
    assert judge(model, "r").retry == RetryPolicy()
    assert repr(judge(model, "r")) == "judge(ScriptedModel(1 replies), 'r')"
    assert repr(judge(model, "r", retry=RetryPolicy(max_retries=1))) == (
        "judge(ScriptedModel(1 replies), 'r', retry=RetryPolicy(max_retries=1))"
    )


def test_an_anthropic_judge_retries_a_429_from_the_server() -> None:
    """The real SDK against the 127.0.0.1 Messages API server: a 429, then the grade."""
    with MessagesAPIServer() as server:
        server.script(
            status(429, headers={"retry-after": "0"}),
            tool_use("score", {"score": True, "explanation": "names Paris"}),
        )
        model = AnthropicModel("claude-test", base_url=server.base_url, api_key="k")
        exp = answered().map(
            ["France?"], scorers=[judge(model, "Names the capital.", retry=FAST)],
            store=False, progress=False,
        )  # fmt: skip
        assert [request.status for request in server.requests] == [429, 200]
    row = exp.frame().iloc[0]
    assert row["judge"] == True  # noqa: E712 - a numpy bool
    assert row["judge_explanation"] == "names Paris"
