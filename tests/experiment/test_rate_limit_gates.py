"""Only a rate limit pauses an experiment's other runs, and only those calling that model."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from thena_nb import Agent, Workflow, loop, until_answered
from thena_nb.core.records.errors import TransientModelError
from thena_nb.core.records.types import RetryPolicy
from thena_nb.experiments import run_experiment
from thena_nb.experiments._gate import is_rate_limit
from thena_nb.models import FunctionModel, ModelRequest

FAST_RETRY = RetryPolicy(initial_delay=0.01, jitter=False)


def failing_once(
    error: TransientModelError, calls: list[float], raised: list[float] | None = None
) -> Any:
    """A model whose fifth call raises `error` (at the time kept in `raised`); every call
    takes 10 ms."""

    async def respond(request: ModelRequest) -> Any:
        calls.append(time.monotonic())
        n = len(calls)
        await asyncio.sleep(0.01)
        if n == 5:
            if raised is not None:
                raised.append(time.monotonic())
            raise error
        return "answer"

    return respond


def workflow(fn: Any, name: str = "w", *, turns: int = 1) -> Workflow:
    agent = Agent("A", model=FunctionModel(fn, name=name))
    until = until_answered if turns == 1 else (lambda ctx: ctx.iteration >= turns)
    return Workflow("w", [loop(steps=[agent], until=until)], retry=FAST_RETRY)


@pytest.mark.parametrize(
    ("error", "limit"),
    [
        (TransientModelError("429", status_code=429), True),
        (TransientModelError("overloaded", status_code=529), True),
        (TransientModelError("slow down", retry_after=1.0), True),
        (TransientModelError("connection reset"), False),
        (TransientModelError("bad gateway", status_code=502), False),
        (TransientModelError("timed out", status_code=408), False),
    ],
)
def test_what_counts_as_a_rate_limit(error: TransientModelError, limit: bool) -> None:
    assert is_rate_limit(error) is limit


def test_a_transient_error_that_is_no_rate_limit_pauses_nobody() -> None:
    calls: list[float] = []
    error = TransientModelError("connection reset", status_code=None)
    wf = workflow(failing_once(error, calls))
    wf.retry = RetryPolicy(initial_delay=0.5, jitter=False)  # a gate would close for 0.5 s
    started = time.monotonic()
    exp = run_experiment(
        wf, [f"q{i}" for i in range(8)], concurrency=8, store=False, progress=False
    )
    assert [r.status for r in exp.runs] == ["finished"] * 8
    assert exp.slowdowns == 0
    others = [t for t in calls[5:] if t - started < 0.4]
    assert len(others) >= 3, "the other runs went on while one retried"


def test_a_rate_limit_on_one_model_does_not_pause_another() -> None:
    limited: list[float] = []
    raised: list[float] = []
    free: list[float] = []
    error = TransientModelError("429", retry_after=0.4, status_code=429)
    base = workflow(failing_once(error, limited, raised), name="limited", turns=3)

    async def other(request: ModelRequest) -> Any:
        free.append(time.monotonic())
        await asyncio.sleep(0.02)
        return "answer"

    variants = {"limited": {}, "free": {"A": {"model": FunctionModel(other, name="free")}}}
    exp = run_experiment(
        base, [f"q{i}" for i in range(6)], variants=variants, concurrency=12, store=False,
        progress=False,
    )  # fmt: skip
    assert {r.status for r in exp.runs} == {"finished"}
    assert exp.slowdowns == 1
    (t429,) = raised
    assert not [t for t in limited if t429 < t < t429 + 0.35]  # that model's gate held
    assert len(free) == 18
    assert [t for t in free if t429 < t < t429 + 0.35]  # the other model went on meanwhile
