"""Scoring runs: scorers by name, one `Scored` row per run, and errors kept per row.

`named_scorers` checks the scorers before any run starts; `score_runs` calls every scorer on
every run. A scorer that raises (or returns something that is no score) gives that run an
error for that scorer, in the row's `errors`; the other scorers and runs go on. Sync scorers
are called at once; async ones (the judge) are awaited together, at most `concurrency` at a
time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import math
import numbers
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from thena_nb.core.runs.run import Run
from thena_nb.experiments._scorers import Score, Scorer
from thena_nb.experiments.cases import Case

__all__ = ["RESERVED", "Scored", "Scoring", "explaining", "named_scorers", "score_runs"]

RESERVED = frozenset(
    {
        "input", "case", "variant", "repeat", "status", "stop_reasons", "turns", "tool_calls",
        "rescued", "failures", "input_tokens", "output_tokens", "wall_s", "scorer_error",
        "runs", "statuses", "mean_turns", "mean_tool_calls", "mean_wall_s", "scorer_errors",
    }
)  # fmt: skip
"""Column names of `exp.frame()` and `exp.compare()` that no scorer may take."""


@dataclasses.dataclass
class Scored:
    """One run's scores: a value per scorer (`None` where it failed), explanations, errors."""

    values: dict[str, bool | float | None] = dataclasses.field(default_factory=dict)
    explanations: dict[str, str] = dataclasses.field(default_factory=dict)
    errors: list[str] = dataclasses.field(default_factory=list)

    def keep(self, name: str, result: Any) -> None:
        """Keep what scorer `name` returned, or an error when it is no score."""
        try:
            value, explanation = _as_score(result)
        except TypeError as exc:
            self.fail(name, exc)
            return
        self.values[name] = value
        if explanation is not None:
            self.explanations[name] = explanation

    def fail(self, name: str, exc: BaseException) -> None:
        """Record that scorer `name` raised `exc` on this run."""
        self.values[name] = None
        self.errors.append(f"{name}: {type(exc).__name__}: {exc}")

    @property
    def error(self) -> str | None:
        """The `scorer_error` cell: every failed scorer, or `None`."""
        return "; ".join(self.errors) if self.errors else None


def _as_score(result: Any) -> tuple[bool | float, str | None]:
    explanation = None
    if isinstance(result, Score):
        result, explanation = result.value, result.explanation
    if isinstance(result, bool):
        return result, explanation
    if getattr(result, "dtype", None) is not None and result.dtype.kind == "b":
        return bool(result), explanation  # a numpy bool
    if isinstance(result, numbers.Real) and math.isfinite(result):
        return float(result), explanation
    raise TypeError(f"returned {result!r}; a scorer returns a bool, a finite number or a Score")


def named_scorers(scorers: Sequence[Scorer] | Mapping[str, Scorer] | None) -> dict[str, Scorer]:
    """The scorers by column name: a mapping's keys, else each scorer's `name` or `__name__`.

    Raises:
        TypeError: `scorers` is a single scorer, or holds something not callable.
        ValueError: A scorer without a usable name, two with the same name, or a name that
            is already a column.
    """
    if scorers is None:
        return {}
    if callable(scorers):
        raise TypeError(f"`scorers` is a list of scorers, got the single scorer {scorers!r}")
    pairs = (
        list(scorers.items())
        if isinstance(scorers, Mapping)
        else [(_name_of(s), s) for s in scorers]
    )
    named: dict[str, Scorer] = {}
    for name, scorer in pairs:
        if not callable(scorer):
            raise TypeError(f"scorer {name!r} is not callable: {scorer!r}")
        if name in named:
            raise ValueError(
                f"two scorers are named {name!r}; give one a `name=`, or pass a dict "
                f"`{{name: scorer}}`"
            )
        if name in RESERVED:
            raise ValueError(f"scorer name {name!r} is already a column; choose another")
        named[name] = scorer
    return named


def _name_of(scorer: Any) -> str:
    name = getattr(scorer, "name", None)
    if not isinstance(name, str):
        name = getattr(scorer, "__name__", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(
            f"scorer {scorer!r} has no name to use as a column; pass a dict `{{name: scorer}}`"
        )
    return name


def explaining(scorers: Mapping[str, Scorer], rows: Sequence[Scored | None]) -> list[str]:
    """The scorers that get an explanation column: judges, and any that explained a run."""
    explained = {name for row in rows if row is not None for name in row.explanations}
    return [n for n, s in scorers.items() if n in explained or getattr(s, "explains", False)]


async def score_runs(
    scorers: Mapping[str, Scorer], items: Sequence[tuple[Run, Case]], *, concurrency: int = 8
) -> list[Scored]:
    """Every scorer on every `(run, case)`, one `Scored` per item, in order.

    Args:
        scorers: The scorers by name.
        items: The runs with their cases.
        concurrency: At most this many async scorers (judges) running at a time.

    Returns:
        The rows; a scorer's error is in its row, never raised.

    Example:
        >>> import asyncio
        >>> from thena_nb import Agent, Case, Workflow
        >>> from thena_nb.models import ScriptedModel
        >>> from thena_nb.scorers import contains
        >>> run = Workflow("w", [Agent("A", model=ScriptedModel(["hi"]))]).run("x", store=False)
        >>> def broken(run, case):
        ...     raise RuntimeError("no")
        >>> (row,) = asyncio.run(score_runs({"hi": contains("hi"), "broken": broken},
        ...                                 [(run, Case("x"))]))
        >>> row.values, row.error
        ({'hi': True, 'broken': None}, 'broken: RuntimeError: no')
    """
    scoring = Scoring(scorers, concurrency=concurrency)
    rows = [scoring.add(run, case) for run, case in items]
    await scoring.wait()
    return rows


class Scoring:
    """Scores runs as they end: sync scorers at once, async ones (judges) as tasks, at most
    `concurrency` at a time, so that no run has to be kept for scoring after it ended.

    `add` needs a running event loop when a scorer is async; `wait` awaits every task (a
    scorer's error stays in its row); `cancel` cancels those still going.
    """

    def __init__(self, scorers: Mapping[str, Scorer], *, concurrency: int = 8) -> None:
        self.scorers = scorers
        self._limit = asyncio.Semaphore(max(1, concurrency))
        self._tasks: list[asyncio.Task[None]] = []

    def add(self, run: Run, case: Case) -> Scored:
        """Score `run` with every scorer; its async scorers' values arrive by `wait()`."""
        row = Scored()
        for name, scorer in self.scorers.items():
            try:
                result = scorer(run, case)
            except Exception as exc:
                row.fail(name, exc)
                continue
            if inspect.isawaitable(result):
                row.values[name] = None  # its place, in scorer order, until it is awaited
                self._tasks.append(asyncio.ensure_future(self._settle(row, name, result)))
            else:
                row.keep(name, result)
        return row

    async def _settle(self, row: Scored, name: str, result: Awaitable[Any]) -> None:
        async with self._limit:
            try:
                value = await result
            except Exception as exc:
                row.fail(name, exc)
                return
        row.keep(name, value)

    async def wait(self) -> None:
        """Return once every async scorer has given its value (or failed)."""
        tasks, self._tasks = self._tasks, []
        if tasks:
            await asyncio.gather(*tasks)

    def cancel(self) -> None:
        """Cancel the async scorers still running (an experiment was cancelled)."""
        for task in self._tasks:
            task.cancel()
