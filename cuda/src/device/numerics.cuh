// Device side of the bit-exact contract (docs/numerics.md). The rules themselves are
// echo/numerics/*.h, written once for host and device and used here by the same names; this file
// adds what only the device has: NaN-propagating min/max and byte permutes, lane-wide NaN tests,
// and the element types' load/store with the conversion instructions that are proven to give the
// shared functions' bits (tests/cuda/test_numerics_intrinsics.cpp). Every operation is one
// correctly rounded binary32 operation in the order the contract writes it (no contraction: the
// library is built with -fmad=false and the shared functions use the __f*_rn intrinsics).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "echo/dtype.h"
#include "echo/numerics/constants.h"
#include "echo/numerics/dtype_rounding.h"
#include "echo/numerics/group_params.h"
#include "echo/quantizer.h"

namespace echo::cuda::device {

// The shared rules under the names the kernels use.
using numerics::bf16_bits_to_float;
using numerics::canonical_nan;
using numerics::code_value_of_bits;
using numerics::encode_bits;
using numerics::encode_magic;
using numerics::finite_to_half_bits;
using numerics::float_to_bf16_bits;
using numerics::float_to_half_bits;
using numerics::GroupMap;
using numerics::half_bits_to_float;
using numerics::is_finite;
using numerics::kRintMagic;
using numerics::group_map_from_fields;
using numerics::make_fp16_group_map;
using numerics::poisoned_value;
using numerics::QuantParams;

// ---- NaN ----------------------------------------------------------------------------------
// Every NaN the library writes is the canonical NaN of its type (docs/numerics.md 1), so the
// kernels compute NaNs as the hardware does (its own canonical NaN 0x7FFFFFFF) and rewrite them
// where a value is stored: outputs, x', the compensator state.

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
// Storage type of each DType and its conversions.
template <DType D> struct Elem;
// store_not_nan / store_pair_not_nan: the conversion instructions (cvt.rn.bf16.f32, cvt.rn.f16.f32
// and their x2 forms), for values known not to be NaN. They give the bits of float_to_bf16_bits and
// finite_to_half_bits for every non-NaN input (all 2^32, tests/cuda/test_numerics_intrinsics.cpp).
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
  static __device__ __forceinline__ T store_not_nan(float v) { return finite_to_half_bits(v); }
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
// make_fp16_group_map, group_map_pass (the wide instances of both kernels: lane_ops.cuh
// lane_group_map), group_map_from_fields (the emulation's maps shared between lanes),
// encode_magic, encode_bits, code_value_of_bits and poisoned_value are the shared ones
// (echo/numerics/group_params.h).

// x^ = fp32(s * fp32(float(q) - z)) for a group whose scale is finite (not poisoned), from float(q)
// and s, z as stored in fp16. Every element of a poisoned group is NaN (poisoned_value).
__device__ __forceinline__ float decode_finite_value(float s, float z, float q) {
  return numerics::dequantize_value(s, z, q);
}

}  // namespace echo::cuda::device
