// The group quantizers on one group and one element (docs/numerics.md 2): the group-parameter
// rule of the zero-aware, naive and symmetric quantizers (fp16 parameters, the scale rounded up,
// poisoning), the encoding of one element and its dequantization. The reference's loops and the
// kernels call these; a change of the quantizer's rounding is a change here.
#pragma once

#include <cstdint>

#include "echo/numerics/constants.h"
#include "echo/numerics/dtype_rounding.h"
#include "echo/numerics/host_device.h"
#include "echo/quantizer.h"

namespace echo::numerics {

// What the rule needs of a QuantSpec (the group size plays no part in it).
struct QuantParams {
  int bits;
  QuantizerKind kind;
  // The deliberate mistake of echo/alteration.h (scale rounded to nearest instead of up); false
  // everywhere else.
  bool scale_to_nearest = false;
  // OverflowGroups::kWide: a finite group whose scale overflows fp16 takes the wide map
  // (docs/numerics.md 2.4) instead of being poisoned.
  bool wide_scale = false;
};

// Everything encoding needs for one group, derived once from its range.
struct GroupMap {
  std::uint16_t scale;       // fp16 bits; kCanonicalNaNHalf for a poisoned group; a wide group's
                             // field is kWideScaleFlag | bf16 bits of its scale
  std::uint16_t zero_point;  // fp16 bits (2^(b-1) for symmetric; 0 when poisoned)
  bool poisoned;             // non-finite input or a scale beyond fp16: every element decodes to NaN
  float recip;               // fp32(1 / scale), 0 for an all-zero group (unused by a wide group)
  float zero_add;            // zero-point added before rounding (0 for symmetric)
  float clip_lo;             // clamp range of t before rounding
  float clip_hi;
  float code_shift;          // 2^(b-1) for symmetric (codes [-L, L] move to [1, 2^b - 1]), else 0
  bool wide;                 // the wide map of docs/numerics.md 2.4 (encode_bits_wide)
  float wide_scale;          // a wide group's scale as a float (its bf16 value), else 0
};

// rint of t, ties to even, for |t| < 2^22 (kRintMagic).
ECHO_HOST_DEVICE float round_to_integer(float t) { return sub_rn(add_rn(t, kRintMagic), kRintMagic); }

// The anchors and unrounded scale of a finite group spanning [mn, mx] (docs/numerics.md 2.2 steps
// 1-2 and 2.3), shared by the fp16 map and the wide map.
struct ScaleAnchors {
  float lo;
  float hi;
  bool snap;
  float sf;  // the scale before rounding to the parameter type
};

ECHO_HOST_DEVICE_INLINE ScaleAnchors scale_anchors(const QuantParams& q, float mn, float mx) {
  const bool symmetric = q.kind == QuantizerKind::kSymmetric;
  const int half_codes = 1 << (q.bits - 1);
  const float levels = static_cast<float>((1 << q.bits) - 1);
  ScaleAnchors a;
  a.lo = mn;
  a.hi = mx;
  a.snap = false;
  if (symmetric) {
    const float amax = max_of(abs_of(mn), abs_of(mx));
    a.sf = div_rn(amax, static_cast<float>(half_codes - 1));
    return a;
  }
  if (q.kind == QuantizerKind::kZeroAware) {
    if (mn <= 0.0f && mx >= 0.0f) {
      a.snap = true;
    } else {
      const float distance_to_zero = mn > 0.0f ? mn : -mx;
      const float range = sub_rn(mx, mn);
      const float d = range == 0.0f ? bits_to_float(kFloatInfinityBits)
                                    : div_rn(mul_rn(distance_to_zero, levels), range);
      if (d <= 1.0f) {
        a.snap = true;
        if (mn > 0.0f) a.lo = 0.0f; else a.hi = 0.0f;
      } else if (d < 2.0f) {
        const float w = sub_rn(d, 1.0f);
        if (mn > 0.0f) a.lo = mul_rn(mn, w); else a.hi = mul_rn(mx, w);
      }
    }
  }
  const float sr = div_rn(sub_rn(a.hi, a.lo), levels);
  const float sz = mul_rn(abs_of(a.lo), kScaleFloorFactor);
  a.sf = sr < sz ? sz : sr;  // max(sr, sz)
  return a;
}

// The zero-point and clamp fields of a map whose scale s (a float, > 0) is chosen (2.2 step 3).
ECHO_HOST_DEVICE_INLINE void finish_group_map(const QuantParams& q, const ScaleAnchors& a, float s,
                                              GroupMap& map) {
  const bool symmetric = q.kind == QuantizerKind::kSymmetric;
  const int half_codes = 1 << (q.bits - 1);
  const float levels = static_cast<float>((1 << q.bits) - 1);
  if (symmetric) {
    map.zero_point = finite_to_half_bits(static_cast<float>(half_codes));
  } else {
    const float zr = div_rn(-a.lo, s);
    float z = zr;
    if (a.snap) z = round_to_integer(min_of(max_of(zr, 0.0f), levels));
    if (z == 0.0f) z = 0.0f;                  // store -0 as +0
    map.zero_point = finite_to_half_bits(z);  // |zr| <= 2048: finite
  }
}

ECHO_HOST_DEVICE_INLINE void set_clamp_fields(const QuantParams& q, GroupMap& map) {
  const int half_codes = 1 << (q.bits - 1);
  if (q.kind == QuantizerKind::kSymmetric) {
    map.zero_add = 0.0f;
    map.clip_lo = -static_cast<float>(half_codes - 1);
    map.clip_hi = static_cast<float>(half_codes - 1);
    map.code_shift = static_cast<float>(half_codes);
  } else {
    map.zero_add = half_bits_to_float(map.zero_point);
    map.clip_lo = 0.0f;
    map.clip_hi = static_cast<float>((1 << q.bits) - 1);
    map.code_shift = 0.0f;
  }
}

ECHO_HOST_DEVICE_INLINE GroupMap poisoned_group_map() {
  GroupMap map;
  map.poisoned = true;
  map.scale = kCanonicalNaNHalf;
  map.zero_point = 0;
  map.recip = 0.0f;
  map.zero_add = 0.0f;
  map.clip_lo = 0.0f;
  map.clip_hi = 0.0f;
  map.code_shift = 0.0f;
  map.wide = false;
  map.wide_scale = 0.0f;
  return map;
}

// One pass of the group-map rule on a group whose values span [mn, mx] (finite: no value is NaN or
// Inf). `wide` false: the fp16 map of docs/numerics.md 2.2 (asymmetric) and 2.3 (symmetric); a
// scale past fp16 poisons the group. `wide` true: the wide map of 2.4, for a finite group whose fp16
// scale overflows: the anchors of the halved range [fp32(mn * 0.5), fp32(mx * 0.5)] (halving keeps
// hi - lo finite), the scale rounded up to bf16 (fp32's exponent range) and flagged by
// kWideScaleFlag in the scale field. One function for both maps, so that a kernel taking the second
// pass where the first one overflows compiles one copy of the rule (lane_ops.cuh lane_group_map).
ECHO_HOST_DEVICE_INLINE GroupMap group_map_pass(const QuantParams& q, float mn, float mx, bool finite, bool wide) {
  GroupMap map = poisoned_group_map();
  if (!finite) return map;
  const bool symmetric = q.kind == QuantizerKind::kSymmetric;
  const int half_codes = 1 << (q.bits - 1);
  const ScaleAnchors a = scale_anchors(q, wide ? mul_rn(mn, 0.5f) : mn, wide ? mul_rn(mx, 0.5f) : mx);
  map.poisoned = false;
  if (!wide && a.sf == 0.0f) {
    // All-zero group: scale 0 makes every code decode to +0.
    map.scale = 0;
    map.zero_point = symmetric ? finite_to_half_bits(static_cast<float>(half_codes)) : 0;
    map.recip = 0.0f;
  } else {
    float s;
    if (wide) {
      const std::uint16_t s_bits = nonnegative_to_bf16_bits_up(a.sf);
      if (s_bits >= kBFloat16InfinityBits || s_bits == 0) return poisoned_group_map();  // not for finite input
      s = bf16_bits_to_float(s_bits);
      map.scale = static_cast<std::uint16_t>(kWideScaleFlag | s_bits);
      map.wide = true;
      map.wide_scale = s;
    } else {
      // Round the scale up so the grid always covers the group; never below the smallest subnormal.
      std::uint16_t s_bits = q.scale_to_nearest ? finite_to_half_bits(a.sf)           // alteration only
                                                : nonnegative_to_half_bits_up(a.sf);  // sf >= 0, not NaN
      if (s_bits == 0) s_bits = kHalfMinSubnormalBits;
      if (s_bits == kHalfInfinityBits) return poisoned_group_map();  // the scale overflows fp16
      s = half_bits_to_float(s_bits);
      map.scale = s_bits;
      map.recip = rcp_rn(s);
    }
    finish_group_map(q, a, s, map);
  }
  set_clamp_fields(q, map);
  return map;
}

// The fp16 map (group_map_pass's first pass). The CUDA kernels of the default spec call this one.
ECHO_HOST_DEVICE_INLINE GroupMap make_fp16_group_map(const QuantParams& q, float mn, float mx, bool finite) {
  return group_map_pass(q, mn, mx, finite, false);
}

// The wide map of a finite group (group_map_pass's second pass).
ECHO_HOST_DEVICE_INLINE GroupMap make_wide_group_map(const QuantParams& q, float mn, float mx) {
  return group_map_pass(q, mn, mx, true, true);
}

// Whether a scale field holds a wide group's bf16 scale (bit 15 set: an fp16 scale is never
// negative, and the poison NaN 0x7E00 is positive).
ECHO_HOST_DEVICE bool is_wide_scale_field(std::uint16_t field) { return (field & kWideScaleFlag) != 0; }

// The wide scale's value (its bf16 bits are the field without the flag).
ECHO_HOST_DEVICE float wide_scale_of_field(std::uint16_t field) {
  return bf16_bits_to_float(static_cast<std::uint16_t>(field & ~kWideScaleFlag));
}

// The map rebuilt from its per-group fields (scale and zero-point bits, reciprocal; the rest
// follows from q): equal to make_group_map's, for kernels that compute a group's map in one lane
// and hand it to the others (a poisoned map's scale is kCanonicalNaNHalf, no finite scale is). The
// wide flag is looked at only when q.wide_scale asks for wide groups, so a caller with the default
// spec (wide_scale false at compile time) compiles to the fp16 map alone.
ECHO_HOST_DEVICE_INLINE GroupMap group_map_from_fields(const QuantParams& q, std::uint16_t scale,
                                                       std::uint16_t zero_point, float recip) {
  GroupMap map = poisoned_group_map();
  if (scale == kCanonicalNaNHalf) return map;
  map.poisoned = false;
  map.scale = scale;
  map.zero_point = zero_point;
  map.recip = recip;
  if (q.wide_scale && is_wide_scale_field(scale)) {
    map.wide = true;
    map.wide_scale = wide_scale_of_field(scale);
  }
  set_clamp_fields(q, map);
  return map;
}

// Whether a group takes the wide map (docs/numerics.md 2.4): its fp16 map is poisoned although the
// group is finite (the only way that happens is a scale past fp16), and wide groups are asked for.
ECHO_HOST_DEVICE bool takes_wide_map(const GroupMap& fp16_map, bool finite, bool wide_groups) {
  return fp16_map.poisoned && finite && wide_groups;
}

// The group map of docs/numerics.md 2.2-2.4: the fp16 map, or the wide map where takes_wide_map.
ECHO_HOST_DEVICE_INLINE GroupMap make_group_map(const QuantParams& q, float mn, float mx, bool finite) {
  const GroupMap map = make_fp16_group_map(q, mn, mx, finite);
  if (takes_wide_map(map, finite, q.wide_scale)) return make_wide_group_map(q, mn, mx);
  return map;
}

// The magic constant of a group map: kRintMagic plus the code offset (2^(b-1) for the symmetric
// quantizer, 0 otherwise). The offset is even, so fp32(t + magic) = magic + rint_even(t) for
// |t| <= 255, and the low byte of its bits is the code.
ECHO_HOST_DEVICE float encode_magic(const GroupMap& m) { return add_rn(kRintMagic, m.code_shift); }

// fp32(t + magic) of one element x of a group that is not poisoned (docs/numerics.md 2.2 step 4,
// 2.3): t = clamp(fp32(fp32(x * recip) + zero_add), clip_lo, clip_hi), rounded to an integer,
// ties to even, by the addition. Its low byte is the code (code_of_bits). t is finite there, so the
// clamp's max/min agree on host and device.
ECHO_HOST_DEVICE std::uint32_t encode_bits(const GroupMap& m, float magic, float x) {
  float t = mul_rn(x, m.recip);
  t = add_rn(t, m.zero_add);
  t = min_of(max_of(t, m.clip_lo), m.clip_hi);
  return float_to_bits(add_rn(t, magic));
}

// fp32(t + magic) of one element x of a wide group (docs/numerics.md 2.4): t = clamp(fp32(fp32(
// fp32(x * 0.5) / s) + zero_add), clip_lo, clip_hi) with s the bf16 scale and a true division (a
// reciprocal of a scale near 2^127 would be subnormal).
ECHO_HOST_DEVICE std::uint32_t encode_bits_wide(const GroupMap& m, float magic, float x) {
  float t = div_rn(mul_rn(x, 0.5f), m.wide_scale);
  t = add_rn(t, m.zero_add);
  t = min_of(max_of(t, m.clip_lo), m.clip_hi);
  return float_to_bits(add_rn(t, magic));
}

// x^ of a wide group: fp32( fp32(s * fp32(float(q) - z)) * 2 ), the halving undone exactly.
ECHO_HOST_DEVICE float dequantize_wide_value(float s, float z, float q) {
  return mul_rn(mul_rn(s, sub_rn(q, z)), 2.0f);
}

// The scale with which a wide group's values come out of the common decode: fp32(2s * fp32(float(q)
// - z)) equals dequantize_wide_value's fp32(fp32(s * fp32(float(q) - z)) * 2) for every code, since
// 2s is exact and finite (s <= 2^126 from 3 bits up) and s * d is never subnormal (a wide scale is
// above 2^14, a nonzero d = fp32(q - z) at least fp16's 2^-24), and an overflow of the product is
// an overflow of the doubled one (test_quantizer.cpp checks every bf16 scale of the wide range).
// The kernels decode wide groups so: one multiply per element, as for an fp16 scale.
ECHO_HOST_DEVICE float wide_decode_scale(float s) { return mul_rn(s, 2.0f); }

// x^ of one code given the group's stored parameter fields (fp16 scale or wide scale, fp16 zero).
ECHO_HOST_DEVICE float dequantize_field_value(std::uint16_t scale_field, float z, float q) {
  if (is_wide_scale_field(scale_field)) return dequantize_wide_value(wide_scale_of_field(scale_field), z, q);
  return mul_rn(half_bits_to_float(scale_field), sub_rn(q, z));
}

ECHO_HOST_DEVICE unsigned code_of_bits(std::uint32_t bits) { return bits & 0xFFu; }

// float(code) from an encode_bits() result, exactly (the symmetric offset is part of the magic).
ECHO_HOST_DEVICE float code_value_of_bits(std::uint32_t bits) { return sub_rn(bits_to_float(bits), kRintMagic); }

// The code of one element (groups that are not poisoned; a poisoned group's codes are 0).
ECHO_HOST_DEVICE unsigned quantize_value(const GroupMap& m, float x) {
  return code_of_bits(encode_bits(m, encode_magic(m), x));
}

// x^ = fp32(s * fp32(float(q) - z)) with s and z as stored in fp16, q the code as a float
// (docs/numerics.md 2.2 step 5). A poisoned group's s is NaN, and so is every x^.
ECHO_HOST_DEVICE float dequantize_value(float s, float z, float q) { return mul_rn(s, sub_rn(q, z)); }

// Every element of a poisoned group: the canonical NaN.
ECHO_HOST_DEVICE float poisoned_value() { return bits_to_float(kCanonicalNaNFloat); }

}  // namespace echo::numerics
