#!/usr/bin/env python3
"""Ranks the all-reduce sites of an echo trace by max/RMS of their contributions.

Per-site precision (docs/outliers.md): the sites whose contributions have the largest max/RMS,
measured on a calibration text (a trace from `echotk capture --text CALIBRATION ...`), get 8-bit
codes in runs on another text (`echotk ppl --eight-bit-sites LIST`). For site k, over every pass
and rank of /contributions [passes, sites, ranks, n]: max|x| / sqrt(mean x^2). Prints a table,
then the comma-separated indices of the top --top sites (sorted), ready for --eight-bit-sites.
Needs h5py and echotk (echotk.advise.sites.peak_to_rms computes the ratios).
"""
import argparse
import sys

try:
    import h5py
except ImportError as e:  # the message names what to install
    sys.exit(f"rank_sites.py: {e}; install h5py (pip install h5py)")

from echotk.advise.sites import peak_to_rms


def site_ratios(path):
    with h5py.File(path, "r") as f:
        if f.attrs.get("format") not in ("echo-trace", b"echo-trace"):
            raise ValueError(f"{path}: not an echo trace (root attribute format)")
        try:
            return list(peak_to_rms(f["contributions"]))
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from e


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="echo trace (HDF5) captured on the calibration text")
    parser.add_argument("--top", type=int, default=4, help="how many sites to print for --eight-bit-sites")
    args = parser.parse_args()
    if args.top < 0:
        sys.exit("rank_sites.py: --top must be >= 0")
    try:
        ratios = site_ratios(args.trace)
    except (OSError, ValueError, KeyError) as e:
        print(f"rank_sites.py: {e}", file=sys.stderr)
        sys.exit(2)
    order = sorted(range(len(ratios)), key=lambda k: (-ratios[k], k))
    print("rank site max/rms")
    for rank, k in enumerate(order):
        print(f"{rank:4d} {k:4d} {ratios[k]:9.2f}")
    print(",".join(str(k) for k in sorted(order[: args.top])))


if __name__ == "__main__":
    main()
