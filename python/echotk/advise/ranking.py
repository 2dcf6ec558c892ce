"""The paired comparison of each candidate against 16-bit, the early stop, and the ranking of
`python -m echotk advise` (pure functions of the per-window results).

A candidate's result on a window is d = mean NLL of the candidate - mean NLL of 16-bit on the
same window (the paired difference in log-perplexity, tools/paired_ppl.py's measure). Over the
windows so far: the mean of d and its 95% Student-t interval (scipy.stats). A budget b (perplexity
allowed to grow by a fraction b) is the limit log(1 + b) on d:

- out of budget: the interval's lower bound is above the limit; the candidate stops there (checked
  after every batch of windows, so a clearly costly setting is not run to the end);
- within budget: the upper bound is at or below the limit;
- undecided: the interval holds the limit (more windows would decide).

The candidates that were not stopped are ranked by wire bits per element, then by the modelled
all-reduce time (echotk.advise.timing), then by d; the advice is the first one within budget.
16-bit is one of them, with d = 0 on every window: when nothing cheaper is within budget, it is
the advice.
"""
from __future__ import annotations

import dataclasses
import math
from typing import List, Optional, Tuple

from .._spec import Spec

WITHIN, OUT, UNDECIDED, SKIPPED = "within budget", "out of budget", "undecided", "skipped"


def budget_limit(budget_percent: float) -> float:
    """The limit on d (nats per token) for a perplexity increase of `budget_percent` percent."""
    return math.log1p(budget_percent / 100.0)


def paired_interval(diffs) -> Tuple[float, float, float]:
    """(mean, low, high): the mean of the per-window differences and its two-sided 95% Student-t
    interval; (mean, -inf, inf) with fewer than two windows."""
    n = len(diffs)
    if n == 0:
        return math.nan, -math.inf, math.inf
    mean = sum(diffs) / n
    if n < 2:
        return mean, -math.inf, math.inf
    from scipy import stats

    sd = math.sqrt(sum((x - mean) ** 2 for x in diffs) / (n - 1))
    half = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


@dataclasses.dataclass
class Candidate:
    """One row of the advice: a spec (None: 16-bit), its cost, and its paired results so far."""

    name: str
    spec: Optional[Spec]
    wire_bits: float
    modelled_seconds: float
    diffs: List[float] = dataclasses.field(default_factory=list)
    skipped: str = ""        # why it was not evaluated ("" when it was)
    stopped_after: int = 0   # windows after which it stopped out of budget (0: it was not)

    @property
    def running(self) -> bool:
        return not self.skipped and not self.stopped_after

    def interval(self) -> Tuple[float, float, float]:
        return paired_interval(self.diffs)

    def verdict(self, limit: float) -> str:
        if self.skipped:
            return SKIPPED
        _, low, high = self.interval()
        if low > limit:
            return OUT
        return WITHIN if high <= limit else UNDECIDED


def stop_out_of_budget(candidates: List[Candidate], limit: float) -> List[Candidate]:
    """Stops every running candidate whose interval lies above `limit`; returns those stopped."""
    stopped = [c for c in candidates if c.running and c.verdict(limit) == OUT]
    for c in stopped:
        c.stopped_after = len(c.diffs)
    return stopped


def ranked(candidates: List[Candidate]) -> List[Candidate]:
    """The candidates that ran to the end, cheapest first: wire bits, modelled time, then d."""
    return sorted((c for c in candidates if c.running),
                  key=lambda c: (c.wire_bits, c.modelled_seconds, c.interval()[0]))


def recommend(candidates: List[Candidate], limit: float) -> Candidate:
    """The first ranked candidate within budget, else 16-bit (the one without a spec), which is
    within by definition even where no window ran (every other candidate skipped)."""
    within = next((c for c in ranked(candidates) if c.verdict(limit) == WITHIN), None)
    return within if within is not None else next(c for c in candidates if c.spec is None)


def table_order(candidates: List[Candidate]) -> List[Candidate]:
    """Ranked candidates, then those stopped out of budget (smallest d first), then the skipped."""
    stopped = sorted((c for c in candidates if c.stopped_after), key=lambda c: c.interval()[0])
    return ranked(candidates) + stopped + [c for c in candidates if c.skipped]
