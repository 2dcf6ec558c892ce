// Element-type rounding (docs/numerics.md 1): the canonical NaN, bfloat16 and binary16 round to
// nearest even from binary32, and the round-up conversion of quantizer scales.
//
// portable:: holds the definitions, in integer and binary32 operations that mean the same on host
// and device. On the device the functions outside portable:: use a conversion instruction where
// one is proven to give the same bits (tests/cuda/test_numerics_intrinsics.cpp compares them over
// every input); on the host they are the portable definitions (tests/reference/
// test_numerics_exhaustive.cpp compares those with Eigen's conversions over every input).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

#include "echo/numerics/constants.h"
#include "echo/numerics/host_device.h"

namespace echo::numerics {

ECHO_HOST_DEVICE bool is_nan(float v) { return v != v; }
ECHO_HOST_DEVICE bool is_finite(float v) { return abs_of(v) <= kFloatMax; }

// v, or the canonical fp32 NaN when v is NaN.
ECHO_HOST_DEVICE float canonical_nan(float v) { return v != v ? bits_to_float(kCanonicalNaNFloat) : v; }

// ---- bfloat16 --------------------------------------------------------------------------------
// Round to nearest even: add 0x7FFF plus the lowest kept bit, keep the high half (a carry into the
// exponent is the correct rounding, up to +-Inf); NaN becomes the canonical 0x7FC0.
ECHO_HOST_DEVICE std::uint16_t float_to_bf16_bits(float v) {
  const std::uint32_t u = float_to_bits(v);
  if ((u & kFloatAbsMask) > kFloatInfinityBits) return kCanonicalNaNBFloat16;
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// Exact (a NaN keeps its payload).
ECHO_HOST_DEVICE float bf16_bits_to_float(std::uint16_t b) {
  return bits_to_float(static_cast<std::uint32_t>(b) << 16);
}

// The smallest bfloat16 value >= v, for v >= 0 and not NaN (+Inf past the largest bf16): a wide
// group's scale (docs/numerics.md 2.4).
ECHO_HOST_DEVICE std::uint16_t nonnegative_to_bf16_bits_up(float v) {
  const std::uint32_t u = float_to_bits(v);
  const std::uint16_t truncated = static_cast<std::uint16_t>(u >> 16);
  return (u & 0xFFFFu) != 0 ? static_cast<std::uint16_t>(truncated + 1) : truncated;
}

// v rounded to bfloat16 and back.
ECHO_HOST_DEVICE float round_to_bf16(float v) { return bf16_bits_to_float(float_to_bf16_bits(v)); }

namespace portable {

// binary16 round to nearest even of v (not NaN); overflow gives +-Inf as IEEE requires.
ECHO_HOST_DEVICE std::uint16_t float_to_half_bits_rne(float v) {
  std::uint32_t u = float_to_bits(v);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  u &= kFloatAbsMask;
  // From 65520 = (65504 + 65536) / 2 up (a tie, going to the even 2^16): +-Inf.
  if (u >= 0x477FF000u) return static_cast<std::uint16_t>(sign | kHalfInfinityBits);
  if (u < 0x38800000u) {
    // Below 2^-14 (fp16 subnormal or zero): adding 0.5 leaves |v| rounded to a multiple of 2^-24,
    // ties to even, in the low mantissa bits (2^-24 is the ulp of 0.5).
    const float f = add_rn(bits_to_float(u), 0.5f);
    return static_cast<std::uint16_t>(sign | (float_to_bits(f) - 0x3F000000u));
  }
  // Normal: rebias the exponent by 127 - 15 and round the 13 dropped bits to nearest even; a carry
  // into the exponent is the correct rounding.
  const std::uint32_t odd = (u >> 13) & 1u;
  u += 0xC8000FFFu + odd;  // - (112 << 23) + 0xFFF + odd, modulo 2^32
  return static_cast<std::uint16_t>(sign | (u >> 13));
}

// The binary32 value of a binary16 pattern: exact (a NaN keeps its payload).
ECHO_HOST_DEVICE float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu;
  const std::uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) return bits_to_float(sign | kFloatInfinityBits | (mantissa << 13));
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact.
    const float magnitude = mul_rn(static_cast<float>(mantissa), 0x1p-24f);
    return bits_to_float(sign | float_to_bits(magnitude));
  }
  return bits_to_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// The smallest binary16 value >= v, for v >= 0 and not NaN (+Inf past 65504): round to nearest
// even, then one step up when that fell below v (non-negative binary16 patterns are ordered like
// their values, so +1 is "next up"; 0x7BFF + 1 is +Inf).
ECHO_HOST_DEVICE std::uint16_t float_to_half_bits_up(float v) {
  std::uint16_t bits = float_to_half_bits_rne(v);
  if (half_bits_to_float(bits) < v) ++bits;
  return bits;
}

}  // namespace portable

// ---- binary16 --------------------------------------------------------------------------------
// Round to nearest even of v known not to be NaN. Device: cvt.rn.f16.f32, the same bits for
// every non-NaN input (tests/cuda/test_numerics_intrinsics.cpp, all 2^32 inputs).
ECHO_HOST_DEVICE std::uint16_t finite_to_half_bits(float v) {
#ifdef __CUDA_ARCH__
  return __half_as_ushort(__float2half_rn(v));
#else
  return portable::float_to_half_bits_rne(v);
#endif
}

// Round to nearest even; NaN becomes the canonical 0x7E00.
ECHO_HOST_DEVICE std::uint16_t float_to_half_bits(float v) {
  if (v != v) return kCanonicalNaNHalf;
  return finite_to_half_bits(v);
}

// Exact for every value but NaN. Device: cvt.f32.f16, the same bits for every non-NaN pattern (all
// 2^16, tests/cuda/test_numerics_intrinsics.cpp); a NaN may come back with another payload, which
// is canonical wherever it is stored.
ECHO_HOST_DEVICE float half_bits_to_float(std::uint16_t h) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(h));
#else
  return portable::half_bits_to_float(h);
#endif
}

// v rounded to binary16 and back.
ECHO_HOST_DEVICE float round_to_half(float v) { return half_bits_to_float(float_to_half_bits(v)); }

// The smallest binary16 value >= v, for v >= 0 and not NaN (+Inf past 65504): the quantizer
// scale's rounding (docs/numerics.md 2.2 step 3). Device: cvt.ru.f16.f32, the same bits for every
// v >= 0 (all 2^31 non-negative inputs up to +Inf, tests/cuda/test_numerics_intrinsics.cpp).
ECHO_HOST_DEVICE std::uint16_t nonnegative_to_half_bits_up(float v) {
#ifdef __CUDA_ARCH__
  return __half_as_ushort(__float2half_ru(v));
#else
  return portable::float_to_half_bits_up(v);
#endif
}

// As above; a NaN gives the canonical NaN.
ECHO_HOST_DEVICE std::uint16_t float_to_half_bits_round_up(float v) {
  if (v != v) return kCanonicalNaNHalf;
  return nonnegative_to_half_bits_up(v);
}

}  // namespace echo::numerics
