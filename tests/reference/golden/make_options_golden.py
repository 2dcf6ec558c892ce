#!/usr/bin/env python3
"""Golden vectors for the transport options of docs/numerics.md 2.4-2.6 (wide groups, outliers sent
exactly, the Hadamard rotation), computed by an independent numpy implementation in float32, one
rounding per operation, on top of make_golden.py's quantizer.

    python3 tests/reference/golden/make_options_golden.py tests/reference/golden/transport_options_golden.txt

Each case is one group sent and received alone. Its lines:
    case <quantizer> <bits> <count> <group> <overflow> <outliers> <rotation>
    the input, float32 bit patterns (hex)
    the values quantized: the input rotated (a full group under hadamard), else the input
    the scale field and zero-point bits (hex)
    the outlier entries, index and bf16 value bits (hex) per slot, or "-" without outliers
    the codes
    the values received: dequantized, outliers placed, de-rotated (float32 bits, hex)
"""
import sys

import numpy as np

from make_golden import (encode, f32, float_bits, fp16_bits, fp16_value, hex_line, quantize_on_range, scale_anchors,
                         zero_point_bits)

NAN_BITS = 0x7FC00000  # a poisoned group's values (the canonical NaN)
POISON_SCALE = 0x7E00
WIDE_FLAG = 0x8000


def bits_float(b):
    return f32(np.array([b], dtype=np.uint32).view(np.float32)[0])


def bf16_bits_up(v):
    """The smallest bf16 value >= v >= 0: the top 16 bits, plus one if any dropped bit is set."""
    b = float_bits(v)
    return (b >> 16) + (1 if b & 0xFFFF else 0)


def bf16_bits_nearest(v):
    """bf16 bits of a finite v, round to nearest even."""
    b = float_bits(v)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def bf16_value(bits):
    return bits_float(bits << 16)


# Rotation (2.6).
def sign_negative(e):
    h = (e ^ 0x2545F491) & 0xFFFFFFFF
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return (h >> 31) & 1 == 1


def butterflies(x):
    g = len(x)
    h = 1
    while h < g:
        for i in range(0, g, 2 * h):
            for j in range(i, i + h):
                a, b = x[j], x[j + h]
                x[j], x[j + h] = f32(a + b), f32(a - b)
        h *= 2


def rotate(x):
    g = len(x)
    y = [f32(-v) if sign_negative(e) else f32(v) for e, v in enumerate(x)]
    butterflies(y)
    l = g.bit_length() - 1
    factor = f32(2.0 ** -((l + 1) // 2))
    return [f32(v * factor) for v in y]


def unrotate(x):
    g = len(x)
    y = [f32(v) for v in x]
    butterflies(y)
    l = g.bit_length() - 1
    factor = f32(2.0 ** -(l // 2))
    y = [f32(v * factor) for v in y]
    return [f32(-v) if sign_negative(e) else v for e, v in enumerate(y)]


# Outliers (2.5): the k first in the order larger |x|, then the lower index.
def pick_outliers(x, k):
    order = sorted(range(len(x)), key=lambda i: (-abs(float(x[i])), i))
    return order[:k]


# Wide groups (2.4): the map of the halved range with a bf16 scale.
def wide_quantize(x, mn, mx, kind, bits):
    half = 1 << (bits - 1)
    lo, _, snap, sf = scale_anchors(f32(mn * f32(0.5)), f32(mx * f32(0.5)), kind, bits)
    s_top = bf16_bits_up(sf)
    s = bf16_value(s_top)
    if kind == "symmetric":
        z_bits = fp16_bits(f32(half))
        codes = [encode(f32(f32(v * f32(0.5)) / s), kind, bits) for v in x]
    else:
        z_bits = zero_point_bits(lo, snap, s, bits)
        zf = fp16_value(z_bits)
        codes = [encode(f32(f32(f32(v * f32(0.5)) / s) + zf), kind, bits) for v in x]
    return WIDE_FLAG | s_top, z_bits, codes


def decode(scale_field, z_bits, q):
    z = fp16_value(z_bits)
    if scale_field & WIDE_FLAG:
        s = bf16_value(scale_field & ~WIDE_FLAG)
        return f32(f32(s * f32(f32(q) - z)) * f32(2))
    return f32(fp16_value(scale_field) * f32(f32(q) - z))


def transport(values, kind, bits, group, overflow, k, rotation):
    """One group through the options: (sent, scale field, zero bits, entries, codes, received)."""
    x = [f32(v) for v in values]
    rotated = rotation == "hadamard" and len(x) == group
    sent = rotate(x) if rotated else x
    finite = all(np.isfinite(v) for v in sent)
    picks = pick_outliers(sent, k) if k > 0 and finite else []
    rest = [v for i, v in enumerate(sent) if i not in picks]
    if not finite:
        scale, zero, codes = POISON_SCALE, 0, [0] * len(sent)
    else:
        mn, mx = (f32(min(rest)), f32(max(rest))) if rest else (f32(0), f32(0))
        scale, zero, codes = quantize_on_range(sent, mn, mx, kind, bits)
        if scale == POISON_SCALE and overflow == "wide":
            scale, zero, codes = wide_quantize(sent, mn, mx, kind, bits)
    poisoned = scale == POISON_SCALE
    entries = []
    for j in range(k):
        if poisoned or j >= len(picks):
            entries.append((0xFFFF, 0))
        else:
            entries.append((picks[j], bf16_bits_nearest(sent[picks[j]])))
    if poisoned:
        received = [bits_float(NAN_BITS)] * len(sent)
    else:
        received = [decode(scale, zero, q) for q in codes]
        for index, value in entries:
            if index < len(sent):
                received[index] = bf16_value(value)
    if rotated:
        received = unrotate(received)  # a poisoned group's NaNs too (negation flips their sign bit)
    return sent, scale, zero, entries, codes, received


def cases(rng):
    """(values, group) pairs: groups past the fp16 scale limit and below it, with spikes."""
    limit = 65504.0 * 15  # the 4-bit fp16 scale limit of a range starting at zero
    yield [limit * 0.999] + [0.0] * 15, 16
    yield [limit * 1.001] + [0.0] * 15, 16
    yield list(np.linspace(-3e38, 3e38, 16)), 16           # hi - lo overflows fp32
    yield list(np.linspace(1e37, 2e37, 32)), 32            # one-sided, far from zero
    yield list(-np.linspace(1e30, 5e30, 32)), 32
    yield list(rng.standard_normal(64) * 1e6), 64
    yield list(rng.standard_normal(64) * 1e20), 64
    yield list(rng.standard_normal(37) * 1e8), 64          # partial group: never rotated
    spike = rng.standard_normal(64)
    spike[17] = 3000.0
    spike[50] = -2500.0
    yield list(spike), 64                                  # massive activations
    yield list(rng.standard_normal(32) * 1e-3), 32
    yield [1.0] * 16, 16                                   # a flat group rotates to one spike
    yield [float(i % 5 - 2) for i in range(64)], 64        # small integers
    yield [0.0] * 15 + [np.inf], 1024                      # non-finite: poisoned in every mode (a partial
                                                           # group, so no butterfly makes a NaN)
    for _ in range(2):
        values = rng.standard_normal(64) * 10.0 ** rng.uniform(0, 30)
        values[rng.integers(64)] *= 1000.0
        yield list(values), 64


def combinations():
    """(quantizer, bits, overflow, outliers, rotation) per case: every quantizer, width, overflow
    mode and rotation without outliers; outliers 1 and 2 with the zero-aware 4-bit quantizer."""
    for kind in ("zero-aware", "naive", "symmetric"):
        for bits in (4, 8):
            for overflow in ("poison", "wide"):
                for rotation in ("none", "hadamard"):
                    yield kind, bits, overflow, 0, rotation
    for k in (1, 2):
        for overflow in ("poison", "wide"):
            for rotation in ("none", "hadamard"):
                yield "zero-aware", 4, overflow, k, rotation


def main():
    np.seterr(all="ignore")  # the cases overflow on purpose (ranges past FLT_MAX, Inf - Inf)
    out = sys.argv[1]
    rng = np.random.default_rng(20261202)
    lines = []
    for values, group in cases(rng):
        for kind, bits, overflow, k, rotation in combinations():
            sent, scale, zero, entries, codes, received = transport(values, kind, bits, group, overflow, k, rotation)
            lines.append("case %s %d %d %d %s %d %s" % (kind, bits, len(values), group, overflow, k, rotation))
            lines.append(hex_line([f32(v) for v in values]))
            lines.append(hex_line(sent))
            lines.append("%04x %04x" % (scale, zero))
            lines.append(" ".join("%04x %04x" % e for e in entries) if entries else "-")
            lines.append(" ".join(str(c) for c in codes))
            lines.append(hex_line(received))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
