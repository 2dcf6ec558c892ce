"""The intervals of the result docs, through scipy.stats: Student-t over windows, paired t, Welch.
Every interval is two-sided at LEVEL; with fewer than two values it is (nan, nan)."""
from __future__ import annotations

import math
from typing import Sequence, Tuple

from scipy import stats

LEVEL = 0.95

Interval = Tuple[float, float]


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def sample_sd(values: Sequence[float]) -> float:
    """Sample standard deviation (n - 1); nan for fewer than two values."""
    if len(values) < 2:
        return math.nan
    m = mean(values)
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / (len(values) - 1))


def t_interval(center: float, values: Sequence[float]) -> Interval:
    """center +- t(LEVEL, n - 1) x the standard error of values' mean."""
    if len(values) < 2:
        return math.nan, math.nan
    if sample_sd(values) == 0.0:
        return center, center
    low, high = stats.t.interval(LEVEL, len(values) - 1, loc=center, scale=stats.sem(values))
    return float(low), float(high)


def paired(values: Sequence[float], base: Sequence[float]) -> Tuple[float, Interval]:
    """Mean of values - base, pair by pair, and its paired-t interval."""
    if len(values) != len(base):
        raise ValueError(f"paired: {len(values)} values against {len(base)} baseline values")
    diffs = [v - b for v, b in zip(values, base)]
    d = mean(diffs)
    return d, t_interval(d, diffs)


def welch(values: Sequence[float], base: Sequence[float]) -> Tuple[float, Interval]:
    """mean(values) - mean(base) and its Welch interval (unequal variances)."""
    d = mean(values) - mean(base)
    if len(values) < 2 or len(base) < 2:
        return d, (math.nan, math.nan)
    if sample_sd(values) == 0.0 and sample_sd(base) == 0.0:
        return d, (d, d)
    ci = stats.ttest_ind(values, base, equal_var=False).confidence_interval(LEVEL)
    return d, (float(ci.low), float(ci.high))
