#!/usr/bin/env python3
"""Paired comparison of `echotk ppl --csv` runs over the same windows: for each run, the mean
per-window difference in log-perplexity against a baseline, with a 95% Student-t interval
(scipy.stats), and the perplexity ratio it implies. Prints a Markdown table.

    python3 tools/paired_ppl.py --baseline p4-16bit.csv p4-echo4.csv p4-nocomp4.csv ...

The tables of the docs come from tools/results.py, which computes the same figures from the
perplexity indices (tools/results_lib/ppl.py).
"""

import argparse
import sys
from pathlib import Path

from results_lib.ppl import DataError, compare, read_windows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("runs", nargs="+", type=Path)
    args = parser.parse_args()

    try:
        base = read_windows(str(args.baseline))
        rows = [(path, compare(read_windows(str(path)), base)) for path in [args.baseline] + args.runs]
    except DataError as e:
        raise SystemExit(f"paired_ppl: {e}")
    print("| run | windows | tokens scored | perplexity | 95% CI (windows) | "
          "d log ppl vs baseline | 95% CI (paired) | ppl ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for path, s in rows:
        print(f"| {path.stem} | {s.windows} | {s.predictions} | {s.perplexity:.2f} | "
              f"[{s.ci[0]:.2f}, {s.ci[1]:.2f}] | {s.d:+.4f} | "
              f"[{s.d_ci[0]:+.4f}, {s.d_ci[1]:+.4f}] | {s.ratio:.3f} |")


if __name__ == "__main__":
    sys.exit(main())
