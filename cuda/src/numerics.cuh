// Device side of the bit-exact contract (docs/numerics.md): dtype conversions, the fp16 parameter
// rules, the three group quantizers and the canonical NaN. Every operation is one
// correctly rounded binary32 operation in the order the contract writes it (no contraction: the
// library is built with -fmad=false and uses the __f*_rn intrinsics).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "echo/dtype.h"
#include "echo/quantizer.h"

namespace echo::cuda::device {

// ---- NaN ----------------------------------------------------------------------------------
// Every NaN the library writes is the canonical NaN of its type (docs/numerics.md 1), so the
// kernels compute NaNs as the hardware does (its own canonical NaN 0x7FFFFFFF) and rewrite them
// where a value is stored: outputs, x', the compensator state.
__device__ __forceinline__ float canonical_nan(float v) {
  return v != v ? __uint_as_float(kCanonicalNaNFloat) : v;
}
// min and max that return NaN when either operand is NaN (PTX min.NaN / max.NaN): group statistics
// carry a NaN through to the finiteness test instead of skipping it.
__device__ __forceinline__ float fmin_nan(float a, float b) {
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float fmax_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
// Byte permute (PTX prmt.b32): result byte i is byte sel[4i..4i+3] of the pair {b, a} (a = 0..3).
__device__ __forceinline__ unsigned prmt(unsigned a, unsigned b, unsigned sel) {
  unsigned r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}
__device__ __forceinline__ bool is_finite(float v) { return fabsf(v) <= 3.402823466e38f; }
// Whether any of a lane's values is NaN. Hot loops test the lane once and canonicalize its
// elements only then: a test and a select per element would cost more than the arithmetic.
template <int E>
__device__ __forceinline__ bool any_nan(const float (&v)[E]) {
  bool n = false;
#pragma unroll
  for (int k = 0; k < E; ++k) n = n || v[k] != v[k];
  return n;
}
// The lane's values with every NaN canonical, testing the lane once.
template <int E>
__device__ __forceinline__ void canonicalize_lane(float (&v)[E]) {
  if (!any_nan<E>(v)) return;
#pragma unroll
  for (int k = 0; k < E; ++k) v[k] = canonical_nan(v[k]);
}

// ---- element types -------------------------------------------------------------------------
// Exact for every value but NaN, which may come back as any NaN (it is canonical where stored).
__device__ __forceinline__ float half_bits_to_float(std::uint16_t h) { return __half2float(__ushort_as_half(h)); }
// Round to nearest even; NaN becomes the canonical 0x7E00.
__device__ __forceinline__ std::uint16_t float_to_half_bits(float v) {
  if (v != v) return kCanonicalNaNHalf;
  return __half_as_ushort(__float2half_rn(v));
}
__device__ __forceinline__ float bf16_bits_to_float(std::uint16_t b) {
  return __uint_as_float(static_cast<unsigned>(b) << 16);
}
// Round to nearest even; NaN becomes the canonical 0x7FC0 (docs/numerics.md 1).
__device__ __forceinline__ std::uint16_t float_to_bf16_bits(float v) {
  const unsigned u = __float_as_uint(v);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return kCanonicalNaNBFloat16;
  const unsigned bias = 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>((u + bias) >> 16);
}

// fp16 round to nearest even of a value known not to be NaN (the hardware conversion).
__device__ __forceinline__ std::uint16_t finite_to_half_bits(float v) { return __half_as_ushort(__float2half_rn(v)); }

// Storage type of each DType and its conversions.
template <DType D> struct Elem;
// store_not_nan: the hardware conversion (round to nearest even), for values known not to be NaN.
template <> struct Elem<DType::kFloat32> {
  using T = float;
  static __device__ __forceinline__ float load(T v) { return v; }
  static __device__ __forceinline__ T store(float v) { return canonical_nan(v); }
  static __device__ __forceinline__ T store_not_nan(float v) { return v; }
};
template <> struct Elem<DType::kBFloat16> {
  using T = std::uint16_t;
  static __device__ __forceinline__ float load(T v) { return bf16_bits_to_float(v); }
  static __device__ __forceinline__ T store(float v) { return float_to_bf16_bits(v); }
  static __device__ __forceinline__ T store_not_nan(float v) { return __bfloat16_as_ushort(__float2bfloat16_rn(v)); }
  // Two values into one word, the first in the low half.
  static __device__ __forceinline__ unsigned store_pair_not_nan(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&h);
  }
};
template <> struct Elem<DType::kFloat16> {
  using T = std::uint16_t;
  static __device__ __forceinline__ float load(T v) { return half_bits_to_float(v); }
  static __device__ __forceinline__ T store(float v) { return float_to_half_bits(v); }
  static __device__ __forceinline__ T store_not_nan(float v) { return __half_as_ushort(__float2half_rn(v)); }
  static __device__ __forceinline__ unsigned store_pair_not_nan(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&h);
  }
};
// dtype_rne as a float (the delivered output value).
template <DType D> __device__ __forceinline__ float round_to(float v) {
  return Elem<D>::load(Elem<D>::store(v));
}

// ---- quantizer -----------------------------------------------------------------------------
inline constexpr std::uint16_t kPoisonScale = 0x7E00;  // fp16 quiet NaN marks a poisoned group

struct QuantParams {
  int bits;
  QuantizerKind kind;
};

// Everything encoding needs for one group, derived from its range (docs/numerics.md 2.2, 2.3);
// mirrors detail::make_group_map in reference/src/quantizer.cpp operation for operation.
struct GroupMap {
  std::uint16_t scale;
  std::uint16_t zero_point;
  bool poisoned;
  float recip;
  float zero_add;
  float clip_lo;
  float clip_hi;
  float code_shift;
};

__device__ __forceinline__ float rint_rn(float t) { return __int2float_rn(__float2int_rn(t)); }

__device__ inline GroupMap make_group_map(const QuantParams& q, float mn, float mx, bool finite) {
  GroupMap map;
  map.poisoned = true;
  map.scale = kPoisonScale;
  map.zero_point = 0;
  map.recip = 0.0f;
  map.zero_add = 0.0f;
  map.clip_lo = 0.0f;
  map.clip_hi = 0.0f;
  map.code_shift = 0.0f;
  if (!finite) return map;
  const bool symmetric = q.kind == QuantizerKind::kSymmetric;
  const int half_codes = 1 << (q.bits - 1);
  const float levels = static_cast<float>((1 << q.bits) - 1);
  float lo = mn;
  float hi = mx;
  bool snap = false;
  float sf;
  if (symmetric) {
    const float amax = fmaxf(fabsf(mn), fabsf(mx));
    sf = __fdiv_rn(amax, static_cast<float>(half_codes - 1));
  } else {
    if (q.kind == QuantizerKind::kZeroAware) {
      if (mn <= 0.0f && mx >= 0.0f) {
        snap = true;
      } else {
        const float distance = mn > 0.0f ? mn : -mx;
        const float range = __fsub_rn(mx, mn);
        const float d = range == 0.0f ? __int_as_float(0x7F800000)
                                      : __fdiv_rn(__fmul_rn(distance, levels), range);
        if (d <= 1.0f) {
          snap = true;
          if (mn > 0.0f) lo = 0.0f; else hi = 0.0f;
        } else if (d < 2.0f) {
          const float w = __fsub_rn(d, 1.0f);
          if (mn > 0.0f) lo = __fmul_rn(mn, w); else hi = __fmul_rn(mx, w);
        }
      }
    }
    const float sr = __fdiv_rn(__fsub_rn(hi, lo), levels);
    const float sz = __fmul_rn(fabsf(lo), 0x1p-11f);
    sf = sr < sz ? sz : sr;  // std::max(sr, sz)
  }
  map.poisoned = false;
  if (sf == 0.0f) {
    map.scale = 0;
    map.zero_point = symmetric ? finite_to_half_bits(static_cast<float>(half_codes)) : 0;
    map.recip = 0.0f;
  } else {
    std::uint16_t s_bits = __half_as_ushort(__float2half_ru(sf));  // sf is finite and >= 0
    if (s_bits == 0) s_bits = 1;  // never below the smallest fp16 subnormal, 2^-24
    if (s_bits == 0x7C00) {       // the scale overflows fp16: poisoned like a non-finite group
      map.poisoned = true;
      map.scale = kPoisonScale;
      map.zero_point = 0;
      return map;
    }
    const float s = __half2float(__ushort_as_half(s_bits));
    map.scale = s_bits;
    map.recip = __frcp_rn(s);
    if (symmetric) {
      map.zero_point = finite_to_half_bits(static_cast<float>(half_codes));
    } else {
      const float zr = __fdiv_rn(-lo, s);
      float z = zr;
      if (snap) z = rint_rn(fminf(fmaxf(zr, 0.0f), levels));
      if (z == 0.0f) z = 0.0f;  // store -0 as +0
      map.zero_point = finite_to_half_bits(z);  // |zr| <= 2048: finite
    }
  }
  if (symmetric) {
    map.zero_add = 0.0f;
    map.clip_lo = -static_cast<float>(half_codes - 1);
    map.clip_hi = static_cast<float>(half_codes - 1);
    map.code_shift = static_cast<float>(half_codes);
  } else {
    map.zero_add = __half2float(__ushort_as_half(map.zero_point));
    map.clip_lo = 0.0f;
    map.clip_hi = levels;
    map.code_shift = 0.0f;
  }
  return map;
}

// 1.5 * 2^23: adding it rounds a float of magnitude below 2^22 to an integer, ties to even, and
// leaves that integer in the low mantissa bits (the reference's rint, without a conversion unit).
inline constexpr float kRintMagic = 12582912.0f;  // bits 0x4B400000

// The magic constant of a group map: 1.5 * 2^23 plus the code offset (2^(b-1) for the symmetric
// quantizer, 0 otherwise). The offset is even, so fp32(t + magic) = magic + rint_even(t) for
// |t| <= 255, and the low byte of its bits is the code (the magic's low 22 bits are zero).
__device__ __forceinline__ float encode_magic(const GroupMap& m) {
  return __fadd_rn(kRintMagic, m.code_shift);
}

// fp32(t + magic) of one element (docs/numerics.md 2.2 step 4, 2.3): the code is its low byte.
// Only for groups that are not poisoned: t is then finite, so min/max equal the reference's
// compare-and-select clamps.
__device__ __forceinline__ unsigned encode_bits(const GroupMap& m, float magic, float x) {
  float t = __fmul_rn(x, m.recip);
  t = __fadd_rn(t, m.zero_add);
  t = fminf(fmaxf(t, m.clip_lo), m.clip_hi);
  return __float_as_uint(__fadd_rn(t, magic));
}


// x^ = fp32(s * fp32(float(q) - z)) for a group whose scale is finite (not poisoned), from float(q)
// and s, z as stored in fp16. Every element of a poisoned group is NaN (poisoned_value).
__device__ __forceinline__ float decode_finite_value(float s, float z, float q) {
  return __fmul_rn(s, __fsub_rn(q, z));
}

// float(q) from an encode_bits() result: fp32(bits - 1.5 * 2^23) is the code, exact (the
// symmetric code offset is part of the magic).
__device__ __forceinline__ float code_value_of_bits(unsigned bits) {
  return __fsub_rn(__uint_as_float(bits), kRintMagic);
}

// Every element of a poisoned group: NaN (the poison scale 0x7E00 is the canonical fp16 NaN, and
// its fp32 value the canonical fp32 NaN).
__device__ __forceinline__ float poisoned_value() { return __uint_as_float(kCanonicalNaNFloat); }

}  // namespace echo::cuda::device
