"""The validation summary of `python -m echotk train` runs: the lowest validation loss and its step,
the last one, and whether the curve is flat over the last fifth of the run (the issue's "flat to
within 1% over its last fifth"), read from each run's train.csv and config.json.

    python -m echotk.train.summary RUN_FOLDER...    # one line per run (docs/results-training.md)
"""
from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import sys
from typing import List, Optional, Sequence

FLAT_TOLERANCE = 0.01  # flat: max / min of the validation loss over the last fifth within 1%
LAST_PART = 0.2        # the last fifth of the run's steps
EXIT_BAD_INPUT = 2


def flatness(steps: Sequence[int], values: Sequence[float], total_steps: int) -> float:
    """max / min - 1 of the validation losses evaluated at steps > (1 - LAST_PART) * total_steps;
    nan with fewer than two such evaluations."""
    tail = [v for s, v in zip(steps, values) if s > (1 - LAST_PART) * total_steps]
    if len(tail) < 2 or min(tail) <= 0:
        return float("nan")
    return max(tail) / min(tail) - 1


def is_flat(flat: float) -> bool:
    return math.isfinite(flat) and flat <= FLAT_TOLERANCE


@dataclasses.dataclass
class RunSummary:
    name: str
    step: int             # steps done
    total_steps: int
    min_val: float
    min_step: int
    final_val: float      # the last evaluation's
    final_train: float    # the last step's training loss
    flat: float           # flatness() over the evaluations so far
    trend: float          # last / first - 1 of the evaluations of the last fifth

    @property
    def complete(self) -> bool:
        return self.step >= self.total_steps

    def verdict(self) -> str:
        if not math.isfinite(self.flat):
            return "too few evaluations in the last fifth"
        if is_flat(self.flat):
            text = f"flat ({100 * self.flat:.2f}% <= 1%)"
        else:
            text = f"not flat ({100 * self.flat:.2f}% > 1%, {'rising' if self.trend > 0 else 'falling'})"
        return text if self.complete else text + f", incomplete at {self.step}/{self.total_steps}"

    def details(self) -> str:
        return (f"val min {self.min_val:.4f} at step {self.min_step}, final {self.final_val:.4f} "
                f"(train {self.final_train:.4f}); last fifth: {self.verdict()}")

    def line(self) -> str:
        return f"{self.name}: {self.details()}"


def summarize(folder: str, name: Optional[str] = None) -> RunSummary:
    """The summary of the run in `folder` (ValueError when it has no evaluated validation loss)."""
    with open(os.path.join(folder, "config.json")) as f:
        total = int(json.load(f)["steps"])
    with open(os.path.join(folder, "train.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    evals = [(int(r["step"]), float(r["val_loss"])) for r in rows if r.get("val_loss")]
    if not evals:
        raise ValueError(f"{folder}/train.csv: no validation loss yet")
    steps, values = [s for s, _ in evals], [v for _, v in evals]
    best = min(range(len(values)), key=values.__getitem__)
    tail = [v for s, v in evals if s > (1 - LAST_PART) * total]
    trend = tail[-1] / tail[0] - 1 if len(tail) >= 2 else float("nan")
    return RunSummary(name=name or os.path.basename(os.path.normpath(folder)), step=int(rows[-1]["step"]),
                      total_steps=total, min_val=values[best], min_step=steps[best], final_val=values[-1],
                      final_train=float(rows[-1]["train_loss"]), flat=flatness(steps, values, total), trend=trend)


def main(argv: Optional[List[str]] = None) -> int:
    folders = sys.argv[1:] if argv is None else argv
    if not folders or any(a.startswith("-") for a in folders):
        print("usage: python -m echotk.train.summary RUN_FOLDER...", file=sys.stderr)
        return EXIT_BAD_INPUT
    status = 0
    for folder in folders:
        try:
            print(summarize(folder).line())
        except (OSError, ValueError) as e:
            print(f"echotk.train.summary: {folder}: {e}", file=sys.stderr)
            status = EXIT_BAD_INPUT
        except KeyError as e:
            print(f"echotk.train.summary: {folder}: no field {e} in config.json or train.csv", file=sys.stderr)
            status = EXIT_BAD_INPUT
    return status


if __name__ == "__main__":
    sys.exit(main())
