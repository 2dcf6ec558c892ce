"""The tables and the headline of docs/results-training.md, from the runs under data/training/runs/.
Gaps are in percent of the reference's mean; Welch intervals between the seeds of two kinds, paired
intervals over the seeds both kinds have."""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, Dict, List, Optional, Sequence

from . import stats
from .text import markdown
from .training import Group, Run, groups, main_lr, timing_line

EXACT = "16-bit (exact sum)"
ECHO4 = "Echo 4-bit, global residual"
UNCOMPENSATED4 = "4-bit, no compensation"
PAPER_GAP = 0.009  # the paper: 4-bit training ends less than 0.9% above 16-bit
TRAJECTORY_EVERY = 400  # the steps of the first attempt's table


def pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{100 * x:+.2f}%"


def pct_ci(ci: Sequence[float]) -> str:
    return "n/a (one seed)" if any(math.isnan(c) for c in ci) else f"[{pct(ci[0])}, {pct(ci[1])}]"


def fmt_lr(lr: float) -> str:
    """A learning rate as the docs write it: 1e-3, 7e-4, 1.4e-3."""
    mantissa, exponent = f"{lr:e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"


def ms(seconds: float) -> str:
    return f"{1000 * seconds:.1f}"


def span(values: Sequence[float], fmt: Callable[[float], str], unit: str = "") -> str:
    low, high = fmt(min(values)), fmt(max(values))
    return (low if low == high else f"{low}-{high}") + unit


def thousands(x: float) -> str:
    return f"{x:,.0f}"


METRICS = {"val": "validation", "train": "training"}


def values(group: Group, metric: str) -> List[float]:
    return group.val() if metric == "val" else group.train()


def per_seed(group: Group, metric: str) -> Dict[int, float]:
    return {r.seed: (r.final_val()[1] if metric == "val" else r.train_loss()) for r in group.runs}


@dataclasses.dataclass
class Gap:
    """`group` against `reference` on one metric, relative to the reference's mean."""
    group: Group
    reference: Group
    metric: str

    @property
    def mean(self) -> float:
        return stats.mean(values(self.group, self.metric)) / stats.mean(values(self.reference, self.metric)) - 1

    @property
    def welch(self):
        base = stats.mean(values(self.reference, self.metric))
        _, (low, high) = stats.welch(values(self.group, self.metric), values(self.reference, self.metric))
        return low / base, high / base

    @property
    def pairs(self) -> Dict[int, float]:
        mine, theirs = per_seed(self.group, self.metric), per_seed(self.reference, self.metric)
        return {s: mine[s] / theirs[s] - 1 for s in sorted(set(mine) & set(theirs))}

    @property
    def paired(self):
        gaps = list(self.pairs.values())
        return stats.t_interval(stats.mean(gaps), gaps) if gaps else (math.nan, math.nan)

    def resolved(self) -> Optional[bool]:
        """True when both intervals that exist exclude 0, None when there is none."""
        intervals = [ci for ci in (self.welch, self.paired) if not any(math.isnan(c) for c in ci)]
        if not intervals:
            return None
        return all(low > 0 or high < 0 for low, high in intervals)


class Study:
    """The groups of one study (data/training/runs/STUDY) at its main learning rate and the sweep."""

    def __init__(self, runs: Dict[str, Run]):
        self.runs = runs
        self.groups = groups(runs)
        self.lr = main_lr(self.groups)
        self.main = [g for g in self.groups if g.lr == self.lr]

    def group(self, label: str, lr: Optional[float] = None) -> Optional[Group]:
        lr = self.lr if lr is None else lr
        return next((g for g in self.groups if g.label == label and g.lr == lr), None)

    def exact(self, lr: Optional[float] = None) -> Group:
        return self.group(EXACT, lr)

    def gap(self, label: str, metric: str, reference: str = EXACT) -> Optional[Gap]:
        g, ref = self.group(label), self.group(reference)
        return Gap(g, ref, metric) if g and ref else None


def seeds_text(group: Group, metric: str, digits: int = 4) -> str:
    v = values(group, metric)
    text = f"{stats.mean(v):.{digits}f}"
    return text + (" (" + ", ".join(f"{x:.{digits}f}" for x in v) + ")" if len(v) > 1 else "")


def results_table(study: Study) -> str:
    """Every kind at the main rate: final validation loss and training loss, each with its spread
    and gap to 16-bit, and the validation loss over the last fifth."""
    header = ["run", "seeds", "final val loss", "sd", "vs 16-bit", "train loss (last 100 steps)", "sd", "vs 16-bit",
              "val, mean over the last fifth", "last fifth (max / min - 1)"]
    exact = study.exact()
    lines = []
    for g in study.main:
        cells = [g.label, str(len(g.runs))]
        for metric in ("val", "train"):
            sd = stats.sample_sd(values(g, metric))
            gap = "" if g is exact else f"**{pct(Gap(g, exact, metric).mean)}**" if g.label == ECHO4 else \
                pct(Gap(g, exact, metric).mean)
            cells += [seeds_text(g, metric), "" if math.isnan(sd) else f"{sd:.4f}", gap]
        tail = [stats.mean(r.last_fifth()) for r in g.runs]
        tail_mean = stats.mean(tail)
        base_tail = stats.mean([stats.mean(r.last_fifth()) for r in exact.runs])
        cells.append(f"{tail_mean:.4f}" + ("" if g is exact else f" ({pct(tail_mean / base_tail - 1)})"))
        cells.append(span([r.flatness() for r in g.runs], lambda x: f"{100 * x:.2f}", "%"))
        lines.append(cells)
    return markdown(header, lines)


def comparisons(study: Study) -> List[Gap]:
    """Every kind against 16-bit, then uncompensated 4-bit against every compensated 4-bit kind."""
    out = []
    for g in study.main:
        if g.label != EXACT:
            out += [Gap(g, study.exact(), m) for m in METRICS]
    off = study.group(UNCOMPENSATED4)
    if off:
        for g in study.main:
            if g.config["allreduce"] != "exact" and g.config["compensator"] != "off" and int(g.config["bits"]) == 4:
                out += [Gap(off, g, m) for m in METRICS]
    return out


def comparison_table(study: Study) -> str:
    header = ["run", "against", "loss", "seeds", "gap of the means", "95% (Welch)", "gap per seed",
              "95% (paired by seed)", "0 outside both"]
    lines = []
    for c in comparisons(study):
        pairs = ", ".join(pct(v) for v in c.pairs.values())
        verdict = c.resolved()
        lines.append([c.group.label, c.reference.label, METRICS[c.metric],
                      f"{len(c.group.runs)} / {len(c.reference.runs)}", pct(c.mean), pct_ci(c.welch), pairs,
                      pct_ci(c.paired), "n/a" if verdict is None else "yes" if verdict else "no"])
    return markdown(header, lines)


def sweep_table(study: Study) -> str:
    """Kinds run at more than one rate: validation and training loss per rate, and the same-seed gaps."""
    kinds = [EXACT, ECHO4]
    rates = sorted({g.lr for g in study.groups if g.label in kinds and study.group(kinds[0], g.lr)
                    and study.group(kinds[1], g.lr)})
    header = ["peak lr", "16-bit val", "16-bit train", "Echo 4-bit val", "Echo 4-bit train",
              "Echo vs 16-bit, same seeds: val", "train"]
    lines = []
    for lr in rates:
        exact, echo = study.group(EXACT, lr), study.group(ECHO4, lr)
        cells = [fmt_lr(lr)]
        for g, other in ((exact, echo), (echo, exact)):
            for metric in ("val", "train"):
                cells.append(_seed_cell(g, other, metric))
        for metric in ("val", "train"):
            pairs = Gap(echo, exact, metric).pairs
            seeds = list(pairs)
            cells.append(", ".join(pct(v) for v in pairs.values()) +
                         f" (seed{'s' if len(seeds) > 1 else ''} {', '.join(str(s) for s in seeds)})")
        lines.append(cells)
    return markdown(header, lines)


def _seed_cell(group: Group, other: Group, metric: str) -> str:
    v = per_seed(group, metric)
    if len(v) == 1:
        return f"{next(iter(v.values())):.4f}"
    if set(v) <= set(per_seed(other, metric)):
        return f"{stats.mean(list(v.values())):.4f} ({len(v)} seeds)"
    return ", ".join(f"{x:.4f} (seed {s})" for s, x in v.items())


def _fmt_small(x: float) -> str:
    return f"{x:.3f}" if x >= 0.1 else f"{x:.2g}"


def sites_table(study: Study) -> str:
    """From sites.csv of the first seed of every all-reduce kind at the main rate: the relative net
    and injected error per site, averaged over training."""
    header = ["run", "direction", "mean net / sum", "worst site (its net / sum)", "mean injected / sum"]
    lines = []
    for g in sorted(study.main, key=lambda g: (g.label != UNCOMPENSATED4, g.runs[0].config["bits"])):
        rows = g.runs[0].sites()
        if not rows:
            continue
        for direction in ("forward", "backward"):
            mine = [r for r in rows if r["direction"] == direction and float(r["sum_norm"]) > 0]
            sites = sorted({int(r["site"]) for r in mine})
            net = {k: stats.mean([float(r["net_error"]) / float(r["sum_norm"]) for r in mine if int(r["site"]) == k])
                   for k in sites}
            inj = [stats.mean([float(r["injected_error"]) / float(r["sum_norm"]) for r in mine if int(r["site"]) == k])
                   for k in sites]
            worst = max(sites, key=net.__getitem__)
            lines.append([g.label, direction, _fmt_small(stats.mean(list(net.values()))),
                          f"{worst} ({_fmt_small(net[worst])})", _fmt_small(stats.mean(inj))])
    return markdown(header, lines)


def step_time_table(study: Study) -> str:
    header = ["run", "median step (ms)", "tokens/s", "all-reduce share", "one 50 M-token run"]
    lines = []
    for g in study.main:
        label = g.label + (f", {len(g.runs)} seeds" if len(g.runs) > 1 else "")
        lines.append([label, span([r.median_step_s() for r in g.runs], ms),
                      span([r.tokens_per_s() for r in g.runs], thousands),
                      span([r.median_share() for r in g.runs], lambda x: f"{x:.3f}"),
                      span([r.wall_seconds() for r in g.runs], lambda x: f"{x:.1f}", " s")])
    return markdown(header, lines)


def sweep_speed_text(study: Study) -> str:
    """Step times and all-reduce shares of the runs off the main rate (and off its seeds)."""
    others = [r for g in study.groups if g.lr != study.lr for r in g.runs]
    exact = [r.median_share() for r in others if r.config["allreduce"] == "exact"]
    echo = [r.median_share() for r in others if r.config["allreduce"] != "exact"]
    return (f"{span([r.median_step_s() for r in others], ms)} ms, all-reduce share "
            f"{span(exact, lambda x: f'{x:.3f}')} (16-bit) and {span(echo, lambda x: f'{x:.3f}')} (Echo 4-bit)")


def selection_table(select: Dict[str, Run], study_name: str) -> str:
    """The model selection: the candidates' 16-bit runs; the chosen one (flat, lowest final
    validation loss) in bold."""
    header = ["model", "parameters", "dropout", "val min (step)", "val final", "train (last 100 steps)",
              "last fifth (max / min - 1)", "3,051 steps"]
    lines = []
    for name, r in select.items():
        step, final = r.final_val()
        best_step, best = r.min_val()
        chosen = name == study_name
        final_text = f"{final:.4f}" + ("" if r.complete else f" (step {step})")
        lines.append([f"**{name}**" if chosen else name, f"{r.config['parameters'] / 1e6:.1f} M",
                      f"{r.config['dropout']:g}", f"{best:.4f} ({best_step})",
                      f"**{final_text}**" if chosen else final_text,
                      f"{r.train_loss():.4f}", f"{100 * r.flatness():.2f}%",
                      f"{r.wall_seconds():.1f} s" if r.complete else
                      f"stopped at {r.step[-1]} by the call's budget"])
    return markdown(header, lines)


def trajectory_table(base: Run, other: Run) -> str:
    """The first attempt: validation loss every TRAJECTORY_EVERY steps and at the end, and the
    training loss of the TRAIN_WINDOW steps up to each, for 16-bit and Echo 4-bit."""
    header = ["step", "tokens (M)", "16-bit val", "Echo 4-bit val", "Echo vs 16-bit", "16-bit train (last 100 steps)",
              "Echo 4-bit train (last 100 steps)"]
    steps = [s for s, _ in base.val if s % TRAJECTORY_EVERY == 0 and s > 0]
    steps += [base.total_steps] if base.total_steps not in steps else []
    lowest = {id(r): r.min_val()[0] for r in (base, other)}
    lines = []
    for s in steps:
        cells = [str(s), f"{s * base.config['batch'] * base.config['seq'] / 1e6:.1f}"]
        for r in (base, other):
            v = f"{r.val_at(s):.3f}"
            cells.append(f"**{v}** (lowest)" if lowest[id(r)] == s else v)
        cells.append(pct(other.val_at(s) / base.val_at(s) - 1))
        cells += [f"{base.train_loss(s):.3f}", f"{other.train_loss(s):.3f}"]
        lines.append(cells)
    return markdown(header, lines)


def first_speed_table(runs: Dict[str, Run], timing_logs: Dict[str, str]) -> str:
    """The first attempt's full runs (train.csv, the log's wall time) and the 30-step timing calls."""
    header = ["run", "median step (ms)", "tokens/s", "all-reduce share", "3,051 steps with evaluation"]
    lines = []
    for label, r in runs.items():
        lines.append([label, ms(r.median_step_s()), thousands(r.tokens_per_s()), f"{r.median_share():.3f}",
                      f"{r.wall_seconds():.1f} s"])
    for label, path in timing_logs.items():
        step_ms, tokens, share = timing_line(path)
        lines.append([label, f"{step_ms:.1f}", thousands(tokens), f"{share:.3f}", ""])
    return markdown(header, lines)
