#!/usr/bin/env python3
"""Runs the `echotk ppl` rows of a perplexity index (data/smollm2/ppl/rows.csv) whose per-window CSV
is missing, one at a time, each as

    echotk ppl --text TEXT --windows N --length L --threads 1 --csv CSV <the row's options>

and checks that the wire bits `echotk ppl` prints are the index's. Rows are picked by the prefix
of their name (default `cpp-`, the C++ rows); the index's `text` column names the text (moby,
sotu). Then `python tools/results.py` writes the tables.

    python3 tools/run_ppl_index.py data/smollm2/ppl/rows.csv --echotk build/bin/echotk
"""
from __future__ import annotations

import argparse
import csv
import math
import os
import re
import shlex
import subprocess
import sys

TEXTS = {"moby": "data/smollm2/moby-dick.txt.gz", "sotu": "data/smollm2/state-of-the-union-2009-2021.txt.gz"}
WIRE_BITS = re.compile(r"^wire bits\s+([0-9.]+)", re.MULTILINE)
WIRE_BITS_PRINTED = 1e-4  # echotk ppl prints the wire bits with 4 decimals


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("index", help="the index file (columns text,row,csv,baseline,options,wire_bits,compensated)")
    p.add_argument("--echotk", default="build/bin/echotk")
    p.add_argument("--prefix", default="cpp-", help="run the rows whose name starts with this")
    p.add_argument("--windows", type=int, default=16)
    p.add_argument("--length", type=int, default=512)
    p.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = p.parse_args(argv)

    folder = os.path.dirname(os.path.abspath(args.index))
    with open(args.index, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["row"].startswith(args.prefix)]
    for r in rows:
        path = os.path.relpath(os.path.join(folder, r["csv"]))
        if os.path.isfile(path):
            continue
        if r["text"] not in TEXTS:
            print(f"run_ppl_index: {args.index}: row {r['row']}: unknown text {r['text']!r}", file=sys.stderr)
            return 2
        command = [args.echotk, "ppl", "--text", TEXTS[r["text"]], "--windows", str(args.windows),
                   "--length", str(args.length), "--threads", "1", "--csv", path] + shlex.split(r["options"])
        print(" ".join(shlex.quote(c) for c in command), flush=True)
        if args.dry_run:
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            print(done.stdout + done.stderr, file=sys.stderr)
            return done.returncode
        printed = WIRE_BITS.search(done.stdout)
        if printed is None or not math.isclose(float(printed.group(1)), float(r["wire_bits"]),
                                               abs_tol=WIRE_BITS_PRINTED):
            print(f"run_ppl_index: {r['row']}: echotk ppl printed wire bits "
                  f"{printed.group(1) if printed else '(none)'}, the index says {r['wire_bits']}", file=sys.stderr)
            return 1
        print(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
