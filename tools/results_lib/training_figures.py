"""The figures docs/results-training.md links (docs/figures/training-*.png), drawn from the runs with
matplotlib's Agg backend and written to a temporary name, then renamed."""
from __future__ import annotations

import math
import os
import tempfile
from typing import Dict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from . import stats  # noqa: E402
from .training import Run  # noqa: E402
from .training_tables import Study  # noqa: E402

DPI = 120


def save(fig, path: str) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".fig-", suffix=".png")
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=DPI, format="png")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    finally:
        plt.close(fig)


def _smooth(y: np.ndarray, width: int) -> np.ndarray:
    if width <= 1 or len(y) < width:
        return y
    return np.convolve(y, np.ones(width) / width, mode="valid")


def loss_curves(runs: Dict[str, Run], path: str) -> None:
    """Training loss (moving average over 1% of the run), validation loss, and the second half zoomed."""
    fig, axes = plt.subplots(1, 3, figsize=(18, 4.5))
    for ax in axes:
        ax.set_prop_cycle(color=plt.cm.tab20.colors)
    lowest = math.inf
    for name, r in runs.items():
        tokens = np.array(r.tokens) / 1e6
        width = max(1, len(r.train) // 100)
        axes[0].plot(tokens[width - 1:], _smooth(np.array(r.train), width), label=name, lw=1)
        steps = np.array([s for s, _ in r.val])
        val = np.array([v for _, v in r.val])
        val_tokens = steps * r.config["batch"] * r.config["seq"] / 1e6
        axes[1].plot(val_tokens, val, marker=".", label=name, lw=1)
        late = steps >= 0.5 * r.total_steps
        axes[2].plot(val_tokens[late], val[late], marker=".", label=name, lw=1)
        lowest = min(lowest, min(r.train), val.min())
    for ax, title in zip(axes[:2], ("training loss", "validation loss")):
        ax.set_xlabel("tokens (M)")
        ax.set_ylabel(title)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.set_ylim(lowest - 0.2, lowest + 2.5)
    axes[2].set_xlabel("tokens (M)")
    axes[2].set_title("validation loss, second half (zoom)")
    axes[2].grid(alpha=0.3)
    axes[2].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    save(fig, path)


def lr_sweep(study: Study, path: str) -> None:
    """Final validation and training loss against the peak rate, per kind run at several rates
    (mean over seeds, sample sd as the error bar)."""
    kinds = {}
    for g in study.groups:
        kinds.setdefault(g.label, []).append(g)
    kinds = {k: gs for k, gs in kinds.items() if len(gs) > 1}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    panels = ((axes[0], "val", "final validation loss"), (axes[1], "train", "training loss (last 100 steps)"))
    for ax, metric, title in panels:
        for label, gs in sorted(kinds.items()):
            gs = sorted(gs, key=lambda g: g.lr)
            v = [g.val() if metric == "val" else g.train() for g in gs]
            ax.errorbar([g.lr for g in gs], [stats.mean(x) for x in v],
                        yerr=[0 if len(x) < 2 else stats.sample_sd(x) for x in v], marker="o", capsize=3, label=label)
        ax.set_xscale("log")
        ax.set_xlabel("peak learning rate")
        ax.set_ylabel(title)
        ax.set_title(f"learning-rate sweep: {title}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    save(fig, path)


def site_errors(study: Study, path: str) -> None:
    """Mean relative net (solid) and injected (dashed) error per site over training, forward and
    backward, for the first seed of every kind at the main rate that has sites.csv."""
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2), sharey=True)
    for g in study.main:
        r = g.runs[0]
        rows = r.sites()
        if not rows:
            continue
        for d, direction in enumerate(("forward", "backward")):
            mine = [s for s in rows if s["direction"] == direction and float(s["sum_norm"]) > 0]
            sites = sorted({int(s["site"]) for s in mine})
            net = [np.mean([float(s["net_error"]) / float(s["sum_norm"]) for s in mine if int(s["site"]) == k])
                   for k in sites]
            inj = [np.mean([float(s["injected_error"]) / float(s["sum_norm"]) for s in mine if int(s["site"]) == k])
                   for k in sites]
            line, = axes[d].plot(sites, net, marker="o", label=f"{r.name} net")
            axes[d].plot(sites, inj, ls="--", color=line.get_color(), label=f"{r.name} injected")
    for d, direction in enumerate(("forward", "backward")):
        axes[d].set_title(f"{direction} sites: relative error, mean over training")
        axes[d].set_xlabel("site (2l attention, 2l + 1 MLP)")
        axes[d].set_yscale("log")
        axes[d].grid(alpha=0.3)
    axes[0].set_ylabel("||error|| / ||sum||")
    axes[1].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    save(fig, path)
