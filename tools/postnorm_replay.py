"""Per-site statistics of a recorded trace and of its replay, and what a block-output norm does to
the all-reduce's error (docs/results-gemma3.md).

From the trace: per site, the peak-to-RMS ratio max|x| / rms(x) of the ranks' contributions and
of their sum. From a replay written with `echotk replay --save-outputs` (rank 0's output y_k and
the net error rho_k = y_k - sum_i x_k,i): the error e_k = rho_k that the compensator and the
theorems see, and, with --gguf of a Gemma 3 model, the error that reaches the residual stream
after the site's post-attention / post-feed-forward RMSNorm,

    f_k = norm_k(y_k) - norm_k(y_k - rho_k),   norm_k(v) = v / sqrt(mean_token(v^2) + eps) * w_k

(w_k as the GGUF stores it, the +1 of Gemma's norm included). For both it prints the norm's gain
||f_k|| / ||e_k||, the relative error per site, how much of the error cancels along a pass,
||sum_k e_k|| / sqrt(sum_k ||e_k||^2), and max_t ||S_t|| / max_k ||e_k|| (= max ||S_t|| / q).

    echotk replay TRACE --out R.h5 --save-outputs [--compensator off]
    python tools/postnorm_replay.py TRACE R.h5 [--gguf GEMMA.gguf]
"""
from __future__ import annotations

import argparse
import sys

import h5py
import numpy as np

from echotk.advise import sites


def post_norm_weights(path, sites):
    import gguf

    reader = gguf.GGUFReader(path)
    tensors = {t.name: t for t in reader.tensors}
    field = reader.fields["gemma3.attention.layer_norm_rms_epsilon"]
    eps = float(field.parts[field.data[0]][0])
    names = [f"blk.{k // 2}." + ("post_attention_norm.weight" if k % 2 == 0 else "post_ffw_norm.weight")
             for k in range(sites)]
    return [np.asarray(tensors[n].data, dtype=np.float64) for n in names], eps


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("replay")
    ap.add_argument("--gguf", help="Gemma 3 GGUF whose post-norm weights follow each site")
    ap.add_argument("--per-site", action="store_true", help="print every site")
    args = ap.parse_args(argv)
    with h5py.File(args.trace, "r") as t, h5py.File(args.replay, "r") as r:
        x = t["contributions"][:].astype(np.float64)           # [passes, sites, ranks, n]
        hidden = int(t.attrs["hidden"])
        y = r["outputs"][:, :, 0, :].astype(np.float64)         # [passes, sites, n]
        e = r["net_error"][:].astype(np.float64)
    num_sites = x.shape[1]
    s = x.sum(axis=2)
    peak_x = sites.peak_to_rms(x)
    peak_s = sites.peak_to_rms(s[:, :, None, :])
    if args.gguf:
        weights, eps = post_norm_weights(args.gguf, num_sites)
        f, post = sites.post_norm_errors(y, e, hidden, lambda k, v: sites.rms_norm(v, weights[k], eps))
    else:
        f, post = e, s
    ne, nf = sites.site_norms(e), sites.site_norms(f)        # [passes, sites]
    rel_e = ne / sites.site_norms(s)
    rel_f = nf / sites.site_norms(post)
    if args.per_site:
        print("site | kind | max|x|/rms(x) | max|sum|/rms(sum) | ||e|| | rel e | gain ||f||/||e|| | rel f")
        for k in range(num_sites):
            print(f"{k:4d} | {'attn' if k % 2 == 0 else 'mlp '} | {peak_x[k]:8.1f} | {peak_s[k]:8.1f} | "
                  f"{ne[:, k].mean():9.3f} | {rel_e[:, k].mean():.3f} | {(nf[:, k] / ne[:, k]).mean():.4g} | "
                  f"{rel_f[:, k].mean():.3f}")
    print(f"peak/RMS of contributions: median {np.median(peak_x):.1f}, max {peak_x.max():.1f} (site "
          f"{int(peak_x.argmax())}); of the sums: median {np.median(peak_s):.1f}, max {peak_s.max():.1f}")
    print(f"relative error per site ||e_k||/||sum x||: mean {rel_e.mean():.3f}; after the norm ||f_k||/||norm(sum)||: "
          f"mean {rel_f.mean():.3f}")
    gain = sites.norm_gain(f, e)
    print(f"norm gain ||f_k||/||e_k||: median {np.median(gain):.4g}, min {gain.min():.4g}, max {gain.max():.4g}")
    for name, v in (("before the norm (e)", e), ("after the norm (f)", f)):
        total = np.linalg.norm(v.sum(axis=1), axis=1)
        print(f"{name}: ||sum_k||/sqrt(sum ||.||^2) per pass {np.round(sites.cancellation(v), 3).tolist()}; "
              f"max_t ||S_t|| / max_k ||.|| {sites.partial_sum_peak(v):.3f}; final ||S|| per pass {np.round(total, 3).tolist()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
