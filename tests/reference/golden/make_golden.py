#!/usr/bin/env python3
"""Golden vectors for the quantizers, computed by an independent numpy implementation of
docs/numerics.md section 2 (float32 arithmetic, one rounding per operation, fp16 via numpy).

    python3 tests/reference/golden/make_golden.py tests/reference/golden/quantizer_golden.txt

Each case is one group: a header line "case <quantizer> <bits> <count>", a line of input float32
bit patterns (hex), then the expected fp16 scale and zero-point bits and the codes.
"""
import sys

import numpy as np

f32 = np.float32


def float_bits(v):
    return int(np.array([v], dtype=np.float32).view(np.uint32)[0])


def hex_line(values):
    """float32 bit patterns, hex, space-separated."""
    return " ".join("%08x" % float_bits(v) for v in values)


def fp16_bits(x):
    return int(np.array([x], dtype=np.float32).astype(np.float16).view(np.uint16)[0])


def fp16_value(bits):
    return f32(np.array([bits], dtype=np.uint16).view(np.float16)[0])


def round_up_fp16(v):
    b = fp16_bits(v)
    if fp16_value(b) < v:
        b += 1
    return b


def rint(t):
    return f32(np.rint(f32(t)))


def scale_anchors(mn, mx, kind, bits):
    """docs/numerics.md 2.2 steps 1-2 and 2.3: (lo, hi, snap, sf) of a finite range [mn, mx]
    (lo and hi are None for the symmetric quantizer)."""
    L = f32((1 << bits) - 1)
    half = 1 << (bits - 1)
    if kind == "symmetric":
        a = max(abs(mn), abs(mx))
        return None, None, False, f32(f32(a) / f32(half - 1))
    lo, hi, snap = mn, mx, False
    if kind == "zero-aware":
        if mn <= 0 <= mx:
            snap = True
        else:
            m = mn if mn > 0 else f32(-mx)
            rng = f32(mx - mn)
            d = f32(np.inf) if rng == 0 else f32(f32(m * L) / rng)
            if d <= 1:
                snap = True
                if mn > 0:
                    lo = f32(0)
                else:
                    hi = f32(0)
            elif d < 2:
                w = f32(d - f32(1))
                if mn > 0:
                    lo = f32(mn * w)
                else:
                    hi = f32(mx * w)
    sr = f32(f32(hi - lo) / L)
    sz = f32(abs(lo) * f32(2.0 ** -11))
    return lo, hi, snap, max(sr, sz)


def zero_point_bits(lo, snap, s, bits):
    """2.2 step 3: the fp16 bits of the zero-point of an asymmetric map with scale s."""
    zr = f32(f32(-lo) / s)
    z = zr
    if snap:
        z = rint(min(max(zr, f32(0)), f32((1 << bits) - 1)))
    if z == 0:
        z = f32(0)
    return fp16_bits(z)


def encode(t, kind, bits):
    """2.2 step 4 / 2.3 from t = x / s (+ z): clamp and round to the code."""
    half = 1 << (bits - 1)
    if kind == "symmetric":
        ls = f32(half - 1)
        return int(rint(min(max(t, -ls), ls))) + half
    return int(rint(min(max(t, f32(0)), f32((1 << bits) - 1))))


def quantize_group(values, kind, bits):
    x = np.asarray(values, dtype=np.float32)
    if not np.all(np.isfinite(x)):
        return 0x7E00, 0, [0] * len(x)
    return quantize_on_range(x, f32(x.min()), f32(x.max()), kind, bits)


def quantize_on_range(x, mn, mx, kind, bits):
    """Scale and zero-point bits of the fp16 map of the finite range [mn, mx], and the codes of the
    values x under it (0x7E00 and zero codes where the scale overflows fp16)."""
    half = 1 << (bits - 1)
    lo, _, snap, sf = scale_anchors(mn, mx, kind, bits)
    if sf == 0:
        z_bits = fp16_bits(f32(half)) if kind == "symmetric" else 0
        codes = [half] * len(x) if kind == "symmetric" else [0] * len(x)
        return 0, z_bits, codes
    s_bits = max(round_up_fp16(sf), 1)
    if s_bits == 0x7C00:
        return 0x7E00, 0, [0] * len(x)
    s = fp16_value(s_bits)
    r = f32(f32(1) / s)
    if kind == "symmetric":
        return s_bits, fp16_bits(f32(half)), [encode(f32(v * r), kind, bits) for v in x]
    z_bits = zero_point_bits(lo, snap, s, bits)
    zf = fp16_value(z_bits)
    return s_bits, z_bits, [encode(f32(f32(v * r) + zf), kind, bits) for v in x]


def cases(rng):
    yield [0.0] * 16
    yield [3.25] * 16
    yield [-1e-3] * 16
    yield list(np.linspace(-1.0, 3.0, 16))
    yield list(np.linspace(0.02, 1.0, 32))      # one-sided, within a step of zero
    yield list(np.linspace(0.1, 1.0, 32))       # in the blend zone for 4 bits
    yield list(np.linspace(0.5, 1.0, 32))       # far from zero: naive map
    yield list(-np.linspace(0.1, 1.0, 32))
    yield list(np.linspace(1000.0, 1000.5, 16)) # far from zero, tiny range: zero-point floor
    yield list(rng.standard_normal(128) * 1e-6)
    yield list(rng.standard_normal(128) * 300.0)
    yield list(rng.standard_normal(37))         # partial group
    yield list(np.abs(rng.standard_normal(64)))
    yield [1e-9, 2e-9, -3e-9] + [0.0] * 13      # scales below fp16's normal range
    for _ in range(12):
        scale = 10.0 ** rng.uniform(-4, 3)
        shift = rng.uniform(-3, 3) * scale
        yield list(rng.standard_normal(128) * scale + shift)


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(20261129)
    lines = []
    for values in cases(rng):
        values = [f32(v) for v in values]
        for kind in ("zero-aware", "naive", "symmetric"):
            for bits in (2, 4, 8):
                s_bits, z_bits, codes = quantize_group(values, kind, bits)
                lines.append("case %s %d %d" % (kind, bits, len(values)))
                lines.append(hex_line(values))
                lines.append("%04x %04x" % (s_bits, z_bits))
                lines.append(" ".join(str(c) for c in codes))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
