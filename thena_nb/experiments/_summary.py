"""Scores summarised: each scorer's columns in a frame, and its mean per variant with a
confidence interval and pass@k.

A scorer is pass/fail when every value it gave is a `bool` (its mean is the pass rate and
its interval Wilson's), and numeric otherwise (a seeded bootstrap interval of the mean).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from thena_nb.experiments._scoring import Scored
from thena_nb.experiments._stats import bootstrap_interval, pass_at_k, wilson_interval

__all__ = [
    "Kind",
    "Sample",
    "ScoreStats",
    "compare_cells",
    "compare_columns",
    "frame_cells",
    "frame_columns",
    "kind_of",
    "summarise",
]

Kind = Literal["pass_fail", "numeric"]

Sample = tuple[str, int, Scored]
"""One scored run: its variant, the index of its case, its scores."""


def kind_of(name: str, rows: Sequence[Scored | None]) -> Kind:
    """`"pass_fail"` when every value scorer `name` gave is a bool, else `"numeric"`."""
    for row in rows:
        if row is not None:
            value = row.values.get(name)
            if value is not None and not isinstance(value, bool):
                return "numeric"
    return "pass_fail"


# -- frame --------------------------------------------------------------------------------


def frame_columns(
    names: Sequence[str], kinds: Mapping[str, Kind], explained: Sequence[str]
) -> dict[str, str]:
    """The score columns of `exp.frame()` and their dtypes: each scorer, then its
    explanation when it has one, then `scorer_error`."""
    columns: dict[str, str] = {}
    for name in names:
        columns[name] = "boolean" if kinds[name] == "pass_fail" else "float64"
        if name in explained:
            columns[f"{name}_explanation"] = "string"
    columns["scorer_error"] = "string"
    return columns


def frame_cells(
    row: Scored | None, names: Sequence[str], explained: Sequence[str]
) -> dict[str, Any]:
    """One run's score cells (all missing for a run that was not scored)."""
    cells: dict[str, Any] = {}
    for name in names:
        cells[name] = None if row is None else row.values.get(name)
        if name in explained:
            cells[f"{name}_explanation"] = None if row is None else row.explanations.get(name)
    cells["scorer_error"] = None if row is None else row.error
    return cells


# -- per variant --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ScoreStats:
    """One scorer over one variant's runs."""

    scorer: str
    variant: str
    kind: Kind
    n: int
    """Runs the scorer gave a value for."""
    mean: float | None
    low: float | None
    high: float | None
    pass_at_k: float | None
    """Share of cases where at least one repeat passed (pass/fail, `repeats > 1`)."""


def summarise(
    names: Sequence[str],
    variants: Sequence[str],
    samples: Sequence[Sample],
    *,
    repeats: int,
    confidence: float = 0.95,
    seed: int = 0,
) -> list[ScoreStats]:
    """Every scorer's statistics for every variant, scorer by scorer, in variant order."""
    kinds = {name: kind_of(name, [row for _, _, row in samples]) for name in names}
    out = []
    for name in names:
        for variant in variants:
            mine = [(case, row.values.get(name)) for v, case, row in samples if v == variant]
            scored = [(case, value) for case, value in mine if value is not None]
            out.append(
                _stats(name, variant, kinds[name], scored, repeats, confidence=confidence,
                       seed=seed)
            )  # fmt: skip
    return out


def _stats(
    name: str,
    variant: str,
    kind: Kind,
    scored: list[tuple[int, bool | float]],
    repeats: int,
    *,
    confidence: float,
    seed: int,
) -> ScoreStats:
    n = len(scored)
    if n == 0:
        return ScoreStats(name, variant, kind, 0, None, None, None, None)
    values = [float(value) for _, value in scored]
    mean = sum(values) / n
    if kind == "pass_fail":
        low, high = wilson_interval(sum(1 for v in values if v), n, confidence)
    else:
        low, high = bootstrap_interval(values, confidence, seed=seed)
    at_k = _pass_at_k(scored, repeats) if kind == "pass_fail" and repeats > 1 else None
    return ScoreStats(name, variant, kind, n, mean, low, high, at_k)


def _pass_at_k(scored: list[tuple[int, bool | float]], k: int) -> float:
    """pass@k over cases; a case with fewer scored repeats than `k` counts with those."""
    by_case: dict[int, list[bool]] = defaultdict(list)
    for case, value in scored:
        by_case[case].append(bool(value))
    shares = [pass_at_k(len(v), sum(v), min(k, len(v))) for v in by_case.values()]
    return sum(shares) / len(shares)


def compare_columns(stats: Sequence[ScoreStats], repeats: int) -> dict[str, str]:
    """The score columns of `exp.compare()` and their dtypes, scorer by scorer."""
    columns: dict[str, str] = {}
    for s in stats:
        columns[s.scorer] = "float64"
        columns[f"{s.scorer}_ci_low"] = "float64"
        columns[f"{s.scorer}_ci_high"] = "float64"
        if s.kind == "pass_fail" and repeats > 1:
            columns[f"{s.scorer}_pass@{repeats}"] = "float64"
    return columns


def compare_cells(stats: Sequence[ScoreStats], variant: str, repeats: int) -> dict[str, Any]:
    """One variant's score cells of `exp.compare()`."""
    cells: dict[str, Any] = {}
    for s in stats:
        if s.variant != variant:
            continue
        cells[s.scorer] = s.mean
        cells[f"{s.scorer}_ci_low"] = s.low
        cells[f"{s.scorer}_ci_high"] = s.high
        if s.kind == "pass_fail" and repeats > 1:
            cells[f"{s.scorer}_pass@{repeats}"] = s.pass_at_k
    return cells
