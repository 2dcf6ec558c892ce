#!/usr/bin/env python3
"""Writes a small synthetic trace in the echo-trace format with h5py's defaults.

It is the example of how to produce a trace from Python (docs/trace-format.md), and the file it
writes (data/examples/synthetic_p4.h5) is used by the tests and by scripts/demo.sh. The values are
a stand-in for transformer block outputs: per-rank partial sums whose total has heavy-tailed
channels, as residual-stream activations do.

    python3 data/examples/write_example_trace.py data/examples/synthetic_p4.h5
"""
import argparse

import h5py
import numpy as np


def make_contributions(rng, passes, sites, ranks, tokens, hidden):
    n = tokens * hidden
    # Per-channel scales with a few outlier channels, shared by all sites of a pass.
    channel_scale = np.exp(rng.normal(0.0, 0.6, size=hidden)).astype(np.float32)
    channel_scale[rng.choice(hidden, size=max(1, hidden // 64), replace=False)] *= 8.0
    x = rng.standard_normal((passes, sites, ranks, tokens, hidden)).astype(np.float32)
    x *= channel_scale / np.sqrt(ranks)
    # Each site's output has its own overall magnitude, as attention and MLP blocks do.
    x *= rng.uniform(0.5, 2.0, size=(passes, sites, 1, 1, 1)).astype(np.float32)
    return x.reshape(passes, sites, ranks, n)


def round_to_bfloat16(x):
    """Round float32 to the nearest bfloat16 (ties to even), kept in float32 storage."""
    bits = x.astype(np.float32).view(np.uint32)
    rounding = np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return ((bits + rounding) & np.uint32(0xFFFF0000)).view(np.float32)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output")
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--sites", type=int, default=56)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=100)
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--magnitudes", action="store_true",
                        help="scale site s by 10^(s mod 36): groups far past the fp16 scale limit "
                             "(docs/numerics.md 2.4, --overflow-groups wide); float32 and bfloat16 only")
    args = parser.parse_args()
    if args.magnitudes and args.dtype == "float16":
        parser.error("--magnitudes needs --dtype float32 or bfloat16 (float16 cannot hold the values)")

    rng = np.random.default_rng(args.seed)
    x = make_contributions(rng, args.passes, args.sites, args.ranks, args.tokens, args.hidden)
    if args.magnitudes:
        x *= (10.0 ** (np.arange(args.sites) % 36)).astype(np.float32)[None, :, None, None]
    if args.dtype == "bfloat16":
        x = round_to_bfloat16(x)
    elif args.dtype == "float16":
        x = x.astype(np.float16).astype(np.float32)
    hidden_states = np.cumsum(
        np.concatenate([rng.standard_normal((args.passes, 1, x.shape[-1])).astype(np.float32),
                        x.sum(axis=2)], axis=1), axis=1)
    with h5py.File(args.output, "w") as f:
        f.attrs["format"] = "echo-trace"
        f.attrs["version"] = 1
        f.attrs["ranks"] = args.ranks
        f.attrs["direction"] = "forward"
        f.attrs["tokens"] = args.tokens
        f.attrs["hidden"] = args.hidden
        f.attrs["model"] = "synthetic"
        f.attrs["source"] = "data/examples/write_example_trace.py --seed %d" % args.seed
        d = f.create_dataset("contributions", data=x, compression="gzip", shuffle=True)
        d.attrs["dtype"] = args.dtype
        f.create_dataset("hidden_states", data=hidden_states.astype(np.float32), compression="gzip")
        f.create_dataset("site_kind", data=(np.arange(args.sites) % 2).astype(np.int8))


if __name__ == "__main__":
    main()
