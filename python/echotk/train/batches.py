"""What each training step of `python -m echotk train` learns from: the order of the training
sequences, the validation batches, and the learning rate of the step."""
from __future__ import annotations

import math
from typing import Dict, List

import numpy as np

from .._util import BadInput


class DataOrder:
    """Training sequences of seq + 1 tokens (inputs and shifted targets), epoch after epoch: epoch e
    cuts the stream at a random offset into windows of stride seq and visits them in a random
    order, both drawn from numpy's PCG64 seeded with (data_seed, e). Sequence g of the run is a
    pure function of g, so every run with the same data seed sees the same batches."""

    def __init__(self, ids: np.ndarray, seq: int, data_seed: int):
        if len(ids) < 2 * (seq + 1):
            raise BadInput(f"the training split has {len(ids)} tokens, too few for sequences of {seq}")
        self.ids, self.seq, self.data_seed = ids, seq, data_seed
        self._epochs: Dict[int, np.ndarray] = {}

    def _epoch(self, e: int) -> np.ndarray:
        if e not in self._epochs:
            rng = np.random.Generator(np.random.PCG64([self.data_seed, e]))
            offset = int(rng.integers(0, self.seq))
            count = (len(self.ids) - 1 - offset) // self.seq
            self._epochs = {e: offset + self.seq * rng.permutation(count)}  # keep one epoch cached
        return self._epochs[e]

    def per_epoch(self) -> int:
        return (len(self.ids) - 1 - (self.seq - 1)) // self.seq  # the smallest epoch's count

    def batch(self, step: int, batch: int) -> np.ndarray:
        """[batch, seq + 1] int64 token ids of step `step`."""
        per = self.per_epoch()
        rows = []
        for g in range(step * batch, (step + 1) * batch):
            start = self._epoch(g // per)[g % per]
            rows.append(self.ids[start : start + self.seq + 1])
        return np.stack(rows).astype(np.int64)


def validation_batches(ids: np.ndarray, seq: int, batch: int, limit: int) -> List[np.ndarray]:
    """The validation split as consecutive windows of seq + 1 tokens (stride seq), the first
    `limit` of them (0: all), in batches."""
    count = (len(ids) - 1) // seq
    if limit:
        count = min(count, limit)
    if count < 1:
        raise BadInput(f"the validation split has {len(ids)} tokens, too few for one sequence of {seq}")
    windows = np.stack([ids[i * seq : i * seq + seq + 1] for i in range(count)]).astype(np.int64)
    return [windows[i : i + batch] for i in range(0, count, batch)]


def learning_rate(step: int, total: int, peak: float, warmup: int, min_ratio: float) -> float:
    """Linear warm-up over `warmup` steps to `peak`, then cosine decay to min_ratio * peak at `total`."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))
