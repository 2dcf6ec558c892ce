#!/usr/bin/env python3
"""Per-site relative error of an `echotk replay` result: ||rho_k|| / ||sum_i x_{k,i}|| for every
pass and site (rho_k = /net_error of the result, x from the trace's /contributions). Prints the mean
over passes of each site, then the mean and the maximum over sites. Needs h5py and numpy.

    python3 tools/site_relative_error.py TRACE RESULT [--sites]
"""
import argparse
import sys

try:
    import h5py
    import numpy as np
except ImportError as e:
    sys.exit(f"site_relative_error.py: {e}; install h5py and numpy (pip install h5py numpy)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("result")
    parser.add_argument("--sites", action="store_true", help="print every site's value")
    args = parser.parse_args()
    with h5py.File(args.trace, "r") as t, h5py.File(args.result, "r") as r:
        x = t["contributions"]
        rho = r["net_error"]
        if rho.shape[:2] != x.shape[:2]:
            sys.exit(f"site_relative_error.py: {args.result} does not match {args.trace}")
        passes, sites = x.shape[0], x.shape[1]
        rel = np.zeros((passes, sites))
        for p in range(passes):
            for k in range(sites):
                s = np.sum(np.asarray(x[p, k], dtype=np.float64), axis=0)
                rel[p, k] = np.linalg.norm(rho[p, k]) / max(np.linalg.norm(s), 1e-300)
    per_site = rel.mean(axis=0)
    if args.sites:
        for k, v in enumerate(per_site):
            print(f"site {k:3d} {v:.4f}")
    worst = int(np.argmax(per_site))
    print(f"mean {per_site.mean():.4f} max {per_site.max():.4f} (site {worst})")


if __name__ == "__main__":
    main()
