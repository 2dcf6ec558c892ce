"""The paired evaluation of `python -m echotk advise`: every window through 16-bit and through each
running candidate (the same model made tensor-parallel once; the all-reduce its sites call is
switched), in batches of WINDOWS_PER_BATCH windows, stopping a candidate once it is clearly out of
budget (echotk.advise.ranking) and the whole evaluation once no candidate but 16-bit runs."""
from __future__ import annotations

import sys
from typing import Callable, List, Optional, Sequence

import torch
from torch import nn

from .._allreduce import AllReduce, ExactAllReduce
from ..eval.ppl import score_windows
from ..tensor_parallel import tensor_parallel, undo_tensor_parallel
from .candidates import BASELINE
from .ranking import Candidate, stop_out_of_budget

# The first early stop comes after this many windows: with 4, a paired t interval has 3 degrees
# of freedom (t = 3.18), narrow enough to stop a 4-bit setting that costs SmolLM2 +0.3 nats.
WINDOWS_PER_BATCH = 4


class SelectedAllReduce:
    """The all-reduce a tensor-parallel model calls: whichever one `select` chose (every
    candidate's has the same ranks and dtype). It passes each call's Site on to those that take it."""

    takes_site = True

    def __init__(self, ranks: int, dtype: str):
        self.ranks, self.dtype = ranks, dtype
        self.current = None

    def select(self, allreduce):
        self.current = allreduce

    def reset(self, direction: Optional[str] = None):
        self.current.reset(direction)

    def __call__(self, parts, direction: str = "forward", site=None):
        if getattr(type(self.current), "takes_site", False):
            return self.current(parts, direction, site=site)
        return self.current(parts, direction)


class Progress:
    """A tqdm bar on stderr over forward passes, its total shrinking as candidates stop (so its
    estimate of the time left follows), or nothing."""

    def __init__(self, total: int, enabled: bool):
        self.bar, self.done = None, 0
        if enabled:
            from tqdm import tqdm
            self.bar = tqdm(total=total, unit="window", file=sys.stderr, dynamic_ncols=True,
                            mininterval=1.0 if sys.stderr.isatty() else 30.0, desc="advise")

    def advance(self, note: str):
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix_str(note, refresh=False)
            self.bar.update(1)

    def set_remaining(self, remaining: int):
        if self.bar is not None and self.done + remaining != self.bar.total:
            self.bar.total = self.done + remaining
            self.bar.refresh()

    def close(self):
        if self.bar is not None:
            self.bar.close()


def make_allreduce(candidate: Candidate, ranks: int, device):
    """The candidate's all-reduce; ValueError when this device cannot run it. The evaluation reads
    no report, so a GPU call keeps no x' for its norms."""
    if candidate.spec is None:
        return ExactAllReduce(ranks=ranks, dtype="bf16", device=device)
    return AllReduce(ranks=ranks, spec=candidate.spec, device=device, norms=False)


def run_windows(starts: Sequence[int], candidates: List[Candidate], score: Callable[[Candidate, int], float],
                limit: float, progress: bool = True) -> None:
    """The windows in batches of WINDOWS_PER_BATCH: per window 16-bit's mean NLL, then each running
    candidate's minus it into the candidate's `diffs`; after each batch the candidates out of budget
    stop, and once none but 16-bit runs, so does the loop. `score(candidate, start)` is the mean
    NLL of the window at `start` through the candidate's all-reduce."""
    baseline = next(c for c in candidates if c.name == BASELINE)
    others = [c for c in candidates if c.running and c is not baseline]
    bar = Progress(len(starts) * (1 + len(others)), progress)
    try:
        for first in range(0, len(starts), WINDOWS_PER_BATCH):
            running = [c for c in others if c.running]
            if not running:
                break
            for start in starts[first : first + WINDOWS_PER_BATCH]:
                base = score(baseline, start)
                baseline.diffs.append(0.0)
                bar.advance(BASELINE)
                for c in running:
                    c.diffs.append(score(c, start) - base)
                    bar.advance(c.name)
            stop_out_of_budget(running, limit)
            left = len(starts) - min(len(starts), first + WINDOWS_PER_BATCH)
            still = sum(c.running for c in others)
            bar.set_remaining(left * (1 + still) if still else 0)
    finally:
        bar.close()


def evaluate(model: nn.Module, ids: torch.Tensor, starts: Sequence[int], length: int, bos, ranks: int,
             device, candidates: List[Candidate], limit: float, progress: bool = True) -> None:
    """run_windows over `model` made tensor-parallel (for the time of the call) with one all-reduce
    per candidate; a candidate whose all-reduce this device cannot run is skipped, saying why."""
    reduces = {}
    for c in candidates:
        if not c.skipped:
            try:
                reduces[c.name] = make_allreduce(c, ranks, device)
            except ValueError as e:
                c.skipped = f"cannot run on {device}: {e}"
    selected = SelectedAllReduce(ranks, "bf16")
    tensor_parallel(model, ranks=ranks, allreduce=selected)

    def score(candidate: Candidate, start: int) -> float:
        selected.select(reduces[candidate.name])
        return score_windows(model, ids, [start], length, bos, device, progress=False)[0][5]

    try:
        run_windows(starts, candidates, score, limit, progress)
    finally:
        undo_tensor_parallel(model)
