"""Statistics of the multi-seed suite: means with 95 % Student-t intervals, and paired relative gains.

scipy (the `evidence` and `dev` extras) gives the t quantile; it is imported here only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

LEVEL = 0.95


def t_quantile(df: int, level: float = LEVEL) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.5 + level / 2.0, df))


def mean_ci(values: Sequence[float], level: float = LEVEL) -> tuple[float, float, float]:
    """(mean, lower, upper): the Student-t interval of the mean; a single value has a zero-width one."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        raise ValueError("no values")
    m = float(x.mean())
    if x.size < 2:
        return m, m, m
    half = t_quantile(x.size - 1, level) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return m, m - half, m + half


def paired_gain(
    ours: Sequence[float], other: Sequence[float], level: float = LEVEL
) -> tuple[float, float, float]:
    """Relative gain ours/other - 1 per seed (same seeds, common random numbers): mean and t-interval."""
    if len(ours) != len(other):
        raise ValueError(f"paired samples differ in length: {len(ours)} vs {len(other)}")
    gains = [
        a / b - 1.0 if b > 0 else (0.0 if a <= 0 else math.inf) for a, b in zip(ours, other, strict=True)
    ]
    return mean_ci(gains, level)
