"""The sentences of docs/results-training.md (and the README) that carry numbers of the training runs:
the headline on both metrics, the readings against the paper's < 0.9% and on compensation."""
from __future__ import annotations

from typing import List

from . import stats
from .text import bullet, paragraph
from .training_tables import (ECHO4, EXACT, METRICS, PAPER_GAP, UNCOMPENSATED4, Gap, Study, fmt_lr, pct, values)

TRAIN_FIRST = ("train", "val")


def interval(ci) -> str:
    return "n/a" if any(c != c for c in ci) else f"{pct(ci[0])} to {pct(ci[1])}"


def _seeds(study: Study, label: str) -> str:
    n = len(study.group(label).runs)
    return f"{n} seed{'s' if n > 1 else ''}"


def _pair_span(gap: Gap) -> str:
    pairs = list(gap.pairs.values())
    if len(pairs) < 2:
        return f"seed pair {pct(pairs[0])}" if pairs else "no seed pairs"
    return f"seed pairs {pct(min(pairs))} to {pct(max(pairs))}"


def _intervals(gap: Gap) -> str:
    return f"Welch {interval(gap.welch)}, paired by seed {interval(gap.paired)}"


def against_paper(gap: Gap) -> str:
    """Where one metric's gap stands against the paper's < 0.9%."""
    low, high = gap.welch
    if high < PAPER_GAP:
        return "below 0.9% at 95%"
    if low > PAPER_GAP:
        return "above 0.9% at 95%"
    pairs = list(gap.pairs.values())
    side = "below" if gap.mean < PAPER_GAP else "above"
    count = sum((p < PAPER_GAP) == (side == "below") for p in pairs)
    return (f"{side} 0.9% in the mean and in {count} of {len(pairs)} seed pairs, with 0.9% inside the 95% "
            f"interval")


def _others(study: Study) -> str:
    said = []
    for g in study.main:
        if g.label in (EXACT, ECHO4):
            continue
        gaps = [study.gap(g.label, m) for m in TRAIN_FIRST]
        said.append(f"{g.label} {pct(gaps[0].mean)} / {pct(gaps[1].mean)}" +
                    ("" if len(g.runs) == len(study.exact().runs) else f" ({_seeds(study, g.label)})"))
    return "; ".join(said)


def _compensation_gaps(study: Study) -> List[Gap]:
    """Uncompensated 4-bit against every compensated 4-bit kind at the main rate, both metrics."""
    off = study.group(UNCOMPENSATED4)
    if off is None:
        return []
    return [Gap(off, g, m) for m in TRAIN_FIRST for g in study.main
            if g.config["allreduce"] != "exact" and g.config["compensator"] != "off" and int(g.config["bits"]) == 4]


def compensation(study: Study) -> str:
    """Per metric: how far uncompensated 4-bit ends above each compensated kind, and whether at 95%."""
    said = []
    for metric in TRAIN_FIRST:
        gaps = [c for c in _compensation_gaps(study) if c.metric == metric]
        if not gaps:
            continue
        verdicts = {c.resolved() for c in gaps}
        verdict = ("shown at 95%" if verdicts == {True} else "not testable with one seed" if verdicts == {None}
                   else "not shown at 95%" if verdicts == {False} else "shown at 95% against some kinds only")
        said.append(f"In {METRICS[metric]} loss uncompensated 4-bit ends " +
                    " and ".join(f"{pct(c.mean)} above {c.reference.label} ({_intervals(c)})" for c in gaps) +
                    f": {verdict}.")
    return " ".join(said)


def compensation_verdict(study: Study) -> str:
    """One clause: on which metrics uncompensated 4-bit is shown above Echo 4-bit at 95%."""
    gaps = {c.metric: c for c in _compensation_gaps(study) if c.reference.label == ECHO4}
    shown = [METRICS[m] for m in TRAIN_FIRST if m in gaps and gaps[m].resolved()]
    rest = [METRICS[m] for m in TRAIN_FIRST if m in gaps and not gaps[m].resolved()]
    if not gaps:
        return ""
    if not shown:
        return "compensation is not shown to help at 95% on either loss"
    return f"compensation helps at 95% in {' and '.join(shown)} loss" + (f", not in {' and '.join(rest)} loss"
                                                                           if rest else "")


def headline(study: Study) -> str:
    main = {m: study.gap(ECHO4, m) for m in TRAIN_FIRST}
    text = (f"**Result, on the paper's metric (training cross-entropy, mean of the last 100 logged steps): Echo "
            f"4-bit ends {pct(main['train'].mean)} above 16-bit at learning rate {fmt_lr(study.lr)} "
            f"({_seeds(study, ECHO4)} each; 95% Welch interval {interval(main['train'].welch)}, "
            f"{_pair_span(main['train'])}): {against_paper(main['train'])}. In validation loss it ends "
            f"{pct(main['val'].mean)} ({interval(main['val'].welch)}, {_pair_span(main['val'])}): "
            f"{against_paper(main['val'])}.**")
    others = _others(study)
    if others:
        text += f" Training / validation loss against 16-bit: {others}."
    verdict = compensation_verdict(study)
    if verdict:
        text += f" **{verdict[0].upper()}{verdict[1:]}** (below)."
    return paragraph(text) + "\n\n" + paragraph(sweep_sentence(study))


def sweep_sentence(study: Study) -> str:
    """Which rate is best for each kind on each metric, and Echo 4-bit's seed-0 gap per rate."""
    parts = []
    for metric in ("val", "train"):
        best = {}
        for label in (EXACT, ECHO4):
            rates = {g.lr: stats.mean(values(g, metric)) for g in study.groups if g.label == label}
            best[label] = min(rates, key=rates.get)
        if best[EXACT] == best[ECHO4]:
            parts.append(f"at {fmt_lr(best[EXACT])} in {METRICS[metric]} loss")
        else:
            parts.append(f"at {fmt_lr(best[EXACT])} (16-bit) and {fmt_lr(best[ECHO4])} (Echo 4-bit) in "
                         f"{METRICS[metric]} loss")
    rates = sorted({g.lr for g in study.groups if g.label == ECHO4} & {g.lr for g in study.groups if g.label == EXACT})
    gaps = []
    for lr in rates:
        pair = [Gap(study.group(ECHO4, lr), study.group(EXACT, lr), m).pairs.get(0) for m in TRAIN_FIRST]
        if None not in pair:
            gaps.append(f"{pct(pair[0])} / {pct(pair[1])} at {fmt_lr(lr)}")
    return (f"In the learning-rate sweep (Table 7b) the kinds are best {' and '.join(parts)}; Echo 4-bit's gap to "
            f"16-bit (seed 0, training / validation loss) is {', '.join(gaps)}.")


def readings(study: Study) -> str:
    """The bullets under the comparison table: against the paper, and compensated against not."""
    echo = {m: study.gap(ECHO4, m) for m in TRAIN_FIRST}
    paper = ("**Against the paper's < 0.9%.** " + " ".join(
        f"In {METRICS[m]} loss{', the paper' + chr(39) + 's metric,' if m == 'train' else ''} Echo 4-bit ends "
        f"{pct(echo[m].mean)} above 16-bit ({_intervals(echo[m])}; {_pair_span(echo[m])}): {against_paper(echo[m])}."
        for m in TRAIN_FIRST))
    spread = {m: stats.sample_sd(values(echo[m].group, m)) / stats.mean(values(echo[m].group, m)) for m in TRAIN_FIRST}
    paper += (f" Echo 4-bit's seed spread (sd) is {100 * spread['train']:.2f}% of its training loss and "
              f"{100 * spread['val']:.2f}% of its validation loss.")
    lines = [bullet(paper)]
    comp = compensation(study)
    if comp:
        lines.append(bullet(f"**Compensated against uncompensated 4-bit.** {comp}"))
    return "\n".join(lines)


def readme_sentence(study: Study) -> str:
    """The README's words on training: Echo 4-bit and the other kinds against 16-bit, both metrics."""
    echo = {m: study.gap(ECHO4, m) for m in TRAIN_FIRST}
    verdict = compensation_verdict(study)
    return (f"Echo 4-bit ends {pct(echo['train'].mean)} above 16-bit in training loss, the paper's metric "
            f"({_seeds(study, ECHO4)} each; 95% interval {interval(echo['train'].welch)}; the paper reports < 0.9%), "
            f"and {pct(echo['val'].mean)} in validation loss ({interval(echo['val'].welch)}); training / validation: "
            f"{_others(study)}" + (f"; {verdict}" if verdict else ""))
