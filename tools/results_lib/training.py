"""Runs of `python -m echotk train` (data/training/runs/STUDY/NAME/: config.json, train.csv,
sites.csv; logs/NAME.log or NAME.log beside the folder) and what the docs read from them: the
validation loss (the last evaluation), the training loss as the paper's Appendix B reports it
(mean of the last TRAIN_WINDOW logged steps), flatness over the last fifth, step times."""
from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import re
import statistics
from typing import Dict, List, Optional, Tuple

from .ppl import DataError

TRAIN_WINDOW = 100   # the paper's training loss: mean over the last 100 logged steps
LAST_PART = 0.2      # echotk.train_summary's last fifth
WALL = re.compile(r"^train: steps (\d+)\.\.(\d+) of \d+ in ([0-9.]+) s; median step ([0-9.]+) ms, (\d+) tokens/s, "
                  r"all-reduce share ([0-9.]+)", re.MULTILINE)


@dataclasses.dataclass
class Run:
    name: str
    folder: str
    config: dict
    step: List[int]
    tokens: List[int]
    train: List[float]
    val: List[Tuple[int, float]]        # (step, validation loss) of every evaluation
    seconds: List[float]
    share: List[float]
    log: str                            # the run's log, "" when there is none

    @property
    def lr(self) -> float:
        return float(self.config["lr"])

    @property
    def seed(self) -> int:
        return int(self.config["seed"])

    @property
    def total_steps(self) -> int:
        return int(self.config["steps"])

    @property
    def complete(self) -> bool:
        return self.step[-1] >= self.total_steps

    def train_loss(self, upto: Optional[int] = None, window: int = TRAIN_WINDOW) -> float:
        """Mean training loss of the `window` logged steps up to step `upto` (default: the last)."""
        values = [v for s, v in zip(self.step, self.train) if upto is None or s <= upto]
        if len(values) < window:
            raise DataError(f"{self.folder}/train.csv: fewer than {window} logged steps up to {upto}")
        return math.fsum(values[-window:]) / window

    def final_val(self) -> Tuple[int, float]:
        return self.val[-1]

    def min_val(self) -> Tuple[int, float]:
        return min(self.val, key=lambda sv: sv[1])

    def val_at(self, step: int) -> float:
        for s, v in self.val:
            if s == step:
                return v
        raise DataError(f"{self.folder}/train.csv: no validation loss at step {step}")

    def last_fifth(self) -> List[float]:
        """Validation losses evaluated after (1 - LAST_PART) of the run's steps."""
        return [v for s, v in self.val if s > (1 - LAST_PART) * self.total_steps]

    def flatness(self) -> float:
        tail = self.last_fifth()
        return max(tail) / min(tail) - 1 if len(tail) >= 2 else math.nan

    def median_step_s(self) -> float:
        return statistics.median(self.seconds[1:] if len(self.seconds) > 1 else self.seconds)

    def median_share(self) -> float:
        return statistics.median(self.share[1:] if len(self.share) > 1 else self.share)

    def tokens_per_s(self) -> float:
        return int(self.config["batch"]) * int(self.config["seq"]) / self.median_step_s()

    def wall_seconds(self) -> float:
        """Wall time of the run's calls (evaluations included), summed over its log's calls."""
        calls = WALL.findall(self.log)
        if not calls:
            raise DataError(f"{self.folder}: no log with the run's wall time")
        return math.fsum(float(c[2]) for c in calls)

    def sites(self) -> List[dict]:
        path = os.path.join(self.folder, "sites.csv")
        if not os.path.isfile(path):
            return []
        with open(path, newline="") as f:
            return list(csv.DictReader(f))


def kind_key(config: dict) -> tuple:
    """Sorts 16-bit first, then by bits, compensated before uncompensated, global before local."""
    exact = config["allreduce"] == "exact"
    return (not exact, 0 if exact else int(config["bits"]), config["compensator"] == "off",
            config["residual"] != "global", float(config["eta"]), config["compensator"], config["state_dtype"])


def kind_label(config: dict) -> str:
    """What a run's all-reduce is, without its learning rate and seed."""
    if config["allreduce"] == "exact":
        return "16-bit (exact sum)"
    if config["compensator"] == "off":
        return f"{config['bits']}-bit, no compensation"
    text = f"Echo {config['bits']}-bit"
    if config["compensator"] != "dual":
        text += f", {config['compensator']} compensator"
    if config["bits"] != 8 or config["residual"] != "global":
        text += f", {config['residual']} residual"
    if float(config["eta"]) != 0.75:
        text += f", eta {float(config['eta']):g}"
    if config["state_dtype"] != "fp32":
        text += f", {config['state_dtype']} state"
    return text


def read_run(folder: str) -> Run:
    name = os.path.basename(os.path.normpath(folder))
    try:
        with open(os.path.join(folder, "config.json")) as f:
            config = json.load(f)
        with open(os.path.join(folder, "train.csv"), newline="") as f:
            lines = list(csv.DictReader(f))
    except (OSError, ValueError) as e:
        raise DataError(f"{folder}: {e}") from e
    if not lines:
        raise DataError(f"{folder}/train.csv: no steps")
    try:
        run = Run(name=name, folder=folder, config=config, step=[int(r["step"]) for r in lines],
                  tokens=[int(r["tokens"]) for r in lines], train=[float(r["train_loss"]) for r in lines],
                  val=[(int(r["step"]), float(r["val_loss"])) for r in lines if r["val_loss"]],
                  seconds=[float(r["step_seconds"]) for r in lines], share=[float(r["allreduce_share"]) for r in lines],
                  log=_read_log(folder, name))
    except (KeyError, ValueError) as e:
        raise DataError(f"{folder}/train.csv: {e}") from None
    if not run.val:
        raise DataError(f"{folder}/train.csv: no validation loss")
    if not all(math.isfinite(v) for v in run.train + [v for _, v in run.val]):
        raise DataError(f"{folder}/train.csv: a loss is not finite")
    return run


def _read_log(folder: str, name: str) -> str:
    parent = os.path.dirname(os.path.normpath(folder))
    for path in (os.path.join(parent, "logs", name + ".log"), os.path.join(parent, name + ".log")):
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read()
    return ""


def read_study(folder: str) -> Dict[str, Run]:
    """Every run (sub-folder with train.csv) of a study, by name."""
    runs = {}
    for name in sorted(os.listdir(folder)):
        if os.path.isfile(os.path.join(folder, name, "train.csv")):
            runs[name] = read_run(os.path.join(folder, name))
    if not runs:
        raise DataError(f"{folder}: no runs")
    return runs


def timing_line(log_path: str) -> Tuple[float, float, float]:
    """(median step ms, tokens/s, all-reduce share) of a `--timing` log's last call."""
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            calls = WALL.findall(f.read())
    except OSError as e:
        raise DataError(f"{log_path}: {e.strerror}") from e
    if not calls:
        raise DataError(f"{log_path}: no 'train: steps ...' line")
    _, _, _, ms, tokens, share = calls[-1]
    return float(ms), float(tokens), float(share)


class Group:
    """Runs of one kind and learning rate, differing in the seed."""

    def __init__(self, runs: List[Run]):
        self.runs = sorted(runs, key=lambda r: r.seed)
        self.config = self.runs[0].config
        self.label = kind_label(self.config)
        self.lr = self.runs[0].lr

    def by_seed(self) -> Dict[int, Run]:
        return {r.seed: r for r in self.runs}

    def val(self) -> List[float]:
        return [r.final_val()[1] for r in self.runs]

    def train(self) -> List[float]:
        return [r.train_loss() for r in self.runs]


def groups(runs: Dict[str, Run]) -> List[Group]:
    """Complete runs pooled by kind and learning rate, 16-bit first."""
    pooled: Dict[tuple, List[Run]] = {}
    for r in runs.values():
        if r.complete:
            pooled.setdefault((kind_key(r.config), r.lr), []).append(r)
    return [Group(rs) for _, rs in sorted(pooled.items())]


def main_lr(all_groups: List[Group]) -> float:
    """The learning rate of the 16-bit group with the most seeds (the study's main rate)."""
    exact = [g for g in all_groups if g.config["allreduce"] == "exact"]
    if not exact:
        raise DataError("no 16-bit runs")
    return max(exact, key=lambda g: (len(g.runs), -g.lr)).lr
