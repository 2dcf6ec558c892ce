#!/usr/bin/env python3
"""Small trace files for the input-validation tests, written with h5py's defaults.

    python3 tests/data/generate.py tests/data

good_*.h5 must load; bad_*.h5 must be refused with a message naming the problem (the expected
words are listed in tests/cli/test_cli.cpp next to each file).
"""
import os
import sys

import h5py
import numpy as np


def trace(path, passes=2, sites=3, ranks=4, n=300, dtype="bfloat16", attrs=None, data=None,
          contributions_dtype=np.float32, shape=None, fixed_strings=False, drop=(), extra=None,
          layout=None, direction_backward=False):
    rng = np.random.default_rng(7)
    x = data if data is not None else rng.standard_normal((passes, sites, ranks, n)).astype(np.float32)
    if shape is not None:
        x = x.reshape(shape)
    with h5py.File(path, "w") as f:
        base = {"format": "echo-trace", "version": 1, "ranks": ranks,
                "direction": "backward" if direction_backward else "forward"}
        base.update(attrs or {})
        for key, value in base.items():
            if key in drop:
                continue
            if fixed_strings and isinstance(value, str):
                value = np.bytes_(value)
            f.attrs[key] = value
        if "contributions" not in drop:
            d = f.create_dataset("contributions", data=x.astype(contributions_dtype), **(layout or {}))
            if "dtype" not in drop:
                d.attrs["dtype"] = np.bytes_(dtype) if fixed_strings else dtype
        for name, value in (extra or {}).items():
            f.create_dataset(name, data=value)


def declared_only(path, shape):
    """A header whose /contributions declares `shape` with no data written (no chunk allocated)."""
    with h5py.File(path, "w") as f:
        for key, value in {"format": "echo-trace", "version": 1, "ranks": shape[2],
                           "direction": "forward"}.items():
            f.attrs[key] = value
        d = f.create_dataset("contributions", shape=shape, dtype=np.float32,
                             chunks=(1, 1, shape[2], 1000))
        d.attrs["dtype"] = "float32"


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    p = lambda name: os.path.join(out, name)
    trace(p("good_small.h5"))
    trace(p("good_fixed_strings.h5"), fixed_strings=True, dtype="float16")
    trace(p("bad_missing_contributions.h5"), drop=("contributions",))
    trace(p("bad_format.h5"), attrs={"format": "something-else"})
    trace(p("bad_version.h5"), attrs={"version": 2})
    trace(p("bad_ranks_mismatch.h5"), attrs={"ranks": 3})
    trace(p("bad_rank3_dataset.h5"), shape=(2, 3, 1200))
    trace(p("bad_dtype_attr.h5"), dtype="int8")
    trace(p("bad_float64.h5"), contributions_dtype=np.float64)
    trace(p("bad_no_direction.h5"), drop=("direction",))
    x = np.random.default_rng(3).standard_normal((2, 3, 4, 300)).astype(np.float32)
    x[1, 2, 3, 17] = np.nan
    trace(p("bad_nonfinite.h5"), data=x)
    with open(p("bad_not_hdf5.h5"), "w") as f:
        f.write("this is not an HDF5 file\n")
    trace(p("bad_negative_tokens.h5"), attrs={"tokens": -1, "hidden": -300})
    trace(p("bad_tokens_hidden.h5"), attrs={"tokens": 4, "hidden": 70})
    trace(p("bad_site_kind.h5"), extra={"site_kind": np.array([0, 300, 1], dtype=np.int64)})
    trace(p("bad_hidden_states_shape.h5"),
          extra={"hidden_states": np.zeros((2, 3, 300), dtype=np.float32)})
    trace(p("bad_ranks_range.h5"), ranks=9)
    declared_only(p("bad_declared_size.h5"), (1000, 1000, 4, 1000000))
    # Bytes a terminal would act on, in a fixed-length string (messages must print them escaped).
    trace(p("bad_format_bytes.h5"), attrs={"format": np.bytes_(b"echo\x1b[31m-trace\xff")})
    # Small traces of every storage the reader meets (seeds of the fuzzer and of mutate_traces.py):
    # chunked with gzip and shuffle as TraceWriter writes, every optional attribute and dataset,
    # fixed-length strings with a chunked layout, and a tiny contiguous one.
    kinds = np.array([0, 1, 0], dtype=np.int8)
    hidden = np.random.default_rng(5).standard_normal((2, 4, 60)).astype(np.float32)
    trace(p("good_chunked_gzip.h5"), n=60, layout={"chunks": (1, 1, 4, 60), "compression": "gzip",
                                                    "shuffle": True},
          attrs={"tokens": 3, "hidden": 20, "model": "fixture", "source": "tests/data/generate.py"},
          extra={"site_kind": kinds, "hidden_states": hidden})
    trace(p("good_fixed_chunked.h5"), n=60, fixed_strings=True, dtype="float32",
          layout={"chunks": (1, 3, 4, 20)}, attrs={"model": "fixture"})
    trace(p("good_tiny.h5"), passes=1, sites=2, ranks=2, n=8, direction_backward=True)


if __name__ == "__main__":
    main()
