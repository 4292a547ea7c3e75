"""Confidence intervals for scores: Wilson for pass/fail, a seeded bootstrap for numbers.

Both treat every run as one sample. With `repeats`, the runs of one case are not independent
of each other in what they test (they ask the same question), so an interval is a little
narrower than one over cases would be; pass@k is counted over cases.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

__all__ = ["bootstrap_interval", "pass_at_k", "wilson_interval"]

BOOTSTRAP_RESAMPLES = 2000
"""How many resamples a bootstrap interval draws."""

_CHUNK = 1_000_000
"""At most this many draws at a time, so a large experiment needs little memory."""


def _z(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"`confidence` must be between 0 and 1, got {confidence!r}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(passed: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a pass rate of `passed` out of `n`.

    Unlike the normal approximation it stays inside [0, 1] and is not empty at 0 or n.

    Args:
        passed: How many samples passed.
        n: How many samples there were (at least 1).
        confidence: The interval's confidence level.

    Returns:
        The interval's lower and upper bounds.

    Example:
        >>> low, high = wilson_interval(8, 10)
        >>> round(low, 4), round(high, 4)
        (0.4902, 0.9433)
    """
    if n < 1 or not 0 <= passed <= n:
        raise ValueError(f"need 0 <= passed <= n and n >= 1, got passed={passed!r}, n={n!r}")
    z = _z(confidence)
    p = passed / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap_interval(
    values: Sequence[float],
    confidence: float = 0.95,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """A percentile bootstrap interval of the mean of `values`, the same for the same seed.

    Args:
        values: The samples (at least one).
        confidence: The interval's confidence level.
        resamples: How many resamples to draw.
        seed: The random generator's seed.

    Returns:
        The interval's lower and upper bounds.

    Example:
        >>> bootstrap_interval([0.5, 0.5, 0.5])
        (0.5, 0.5)
        >>> bootstrap_interval([0.0, 1.0] * 50) == bootstrap_interval([0.0, 1.0] * 50)
        True
    """
    import numpy as np

    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("a bootstrap interval needs at least one value")
    alpha = 1 - confidence
    _z(confidence)  # checks `confidence`
    rng = np.random.default_rng(seed)
    per_chunk = max(1, _CHUNK // data.size)
    means = []
    for start in range(0, resamples, per_chunk):
        rows = min(per_chunk, resamples - start)
        picks = rng.integers(0, data.size, size=(rows, data.size))
        means.append(data[picks].mean(axis=1))
    low, high = np.quantile(np.concatenate(means), [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def pass_at_k(n: int, passed: int, k: int) -> float:
    """The chance that at least one of `k` samples passes, from `passed` of `n` samples.

    The unbiased estimator `1 - C(n - passed, k) / C(n, k)` (Chen et al. 2021, "Evaluating
    Large Language Models Trained on Code"); with `k == n` it is 1 when any sample passed.

    Args:
        n: Samples drawn.
        passed: Samples that passed.
        k: Samples allowed (at most `n`).

    Returns:
        pass@k, between 0 and 1.

    Example:
        >>> pass_at_k(5, 1, 5), pass_at_k(5, 0, 5), pass_at_k(4, 2, 1)
        (1.0, 0.0, 0.5)
    """
    if not 1 <= k <= n or not 0 <= passed <= n:
        raise ValueError(f"need 1 <= k <= n and 0 <= passed <= n, got {n=}, {passed=}, {k=}")
    if n - passed < k:
        return 1.0
    return 1.0 - math.comb(n - passed, k) / math.comb(n, k)
