#!/usr/bin/env python3
"""Paired comparison of `echotk ppl --csv` runs over the same windows: for each run, the mean
per-window difference in log-perplexity against a baseline, with a 95% Student-t interval, and the
perplexity ratio it implies. Prints a Markdown table.

    python3 tools/paired_ppl.py --baseline p4-16bit.csv p4-echo4.csv p4-nocomp4.csv ...
"""

import argparse
import csv
import math
from pathlib import Path

# Two-sided 97.5% Student-t quantiles for 1..30 degrees of freedom.
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def load(path: Path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {int(r["start"]): (float(r["nll_sum"]), int(r["predictions"])) for r in rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("runs", nargs="+", type=Path)
    args = parser.parse_args()

    base = load(args.baseline)
    print("| run | windows | tokens scored | perplexity | 95% CI (windows) | "
          "d log ppl vs baseline | 95% CI (paired) | ppl ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for path in [args.baseline] + args.runs:
        run = load(path)
        if sorted(run) != sorted(base):
            raise SystemExit(f"{path}: windows differ from the baseline's")
        starts = sorted(run)
        means = [run[s][0] / run[s][1] for s in starts]
        n = len(means)
        total = sum(run[s][0] for s in starts) / sum(run[s][1] for s in starts)
        t = T975[n - 2] if 2 <= n <= 31 else 1.96
        sd = math.sqrt(sum((m - sum(means) / n) ** 2 for m in means) / (n - 1)) if n > 1 else 0.0
        half = t * sd / math.sqrt(n)
        diffs = [run[s][0] / run[s][1] - base[s][0] / base[s][1] for s in starts]
        d = sum(diffs) / n
        dsd = math.sqrt(sum((x - d) ** 2 for x in diffs) / (n - 1)) if n > 1 else 0.0
        dhalf = t * dsd / math.sqrt(n)
        print(f"| {path.stem} | {n} | {sum(run[s][1] for s in starts)} | {math.exp(total):.2f} | "
              f"[{math.exp(total - half):.2f}, {math.exp(total + half):.2f}] | {d:+.4f} | "
              f"[{d - dhalf:+.4f}, {d + dhalf:+.4f}] | {math.exp(d):.3f} |")


if __name__ == "__main__":
    main()
