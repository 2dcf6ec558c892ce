// Thread- and block-level steps of the one-GPU emulation kernels: four-element lanes of a rank's
// row (any alignment), a group's statistics over up to 256 lanes of a block, and one
// quantize -> dequantize of a lane under a group map. The arithmetic is the shared device
// numerics' (numerics.cuh, lane_ops.cuh); only the data movement lives here.
#pragma once

#include <cstdint>

#include "lane_ops.cuh"

namespace echo::cuda::device {

inline constexpr int kEmulateLane = 4;  // elements per thread

// Whether 4-element lanes starting at multiples of 4 elements from `p` are vector-aligned.
template <DType D>
__device__ __forceinline__ bool lane_aligned(const void* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & (kEmulateLane * sizeof(typename Elem<D>::T) - 1)) == 0;
}

// A lane's values in the dtype as floats, zeros past `valid`; one 8- or 16-byte load when aligned.
template <DType D>
__device__ __forceinline__ void load_lane(const void* base, std::size_t e0, int valid, bool aligned,
                                          float (&v)[kEmulateLane]) {
  using T = typename Elem<D>::T;
  const T* p = static_cast<const T*>(base) + e0;
  if (valid == kEmulateLane && aligned) {
    if constexpr (sizeof(T) == 4) {
      const float4 f = *reinterpret_cast<const float4*>(p);
      v[0] = f.x; v[1] = f.y; v[2] = f.z; v[3] = f.w;
    } else {
      const uint2 u = *reinterpret_cast<const uint2*>(p);
      v[0] = Elem<D>::load(static_cast<T>(u.x & 0xFFFFu));
      v[1] = Elem<D>::load(static_cast<T>(u.x >> 16));
      v[2] = Elem<D>::load(static_cast<T>(u.y & 0xFFFFu));
      v[3] = Elem<D>::load(static_cast<T>(u.y >> 16));
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < kEmulateLane; ++k) v[k] = k < valid ? Elem<D>::load(p[k]) : 0.0f;
}

// Rounds a lane to the dtype (NaN canonical) and stores its `valid` elements; returns the stored
// values as floats (the delivered output, dtype_rne(v)).
template <DType D>
__device__ __forceinline__ void store_lane(void* base, std::size_t e0, int valid, bool aligned,
                                           const float (&v)[kEmulateLane], float (&stored)[kEmulateLane]) {
  using T = typename Elem<D>::T;
  T t[kEmulateLane];
#pragma unroll
  for (int k = 0; k < kEmulateLane; ++k) {
    t[k] = Elem<D>::store(v[k]);
    stored[k] = Elem<D>::load(t[k]);
  }
  T* p = static_cast<T*>(base) + e0;
  if (valid == kEmulateLane && aligned) {
    if constexpr (sizeof(T) == 4) {
      *reinterpret_cast<float4*>(p) = make_float4(t[0], t[1], t[2], t[3]);
    } else {
      *reinterpret_cast<uint2*>(p) = make_uint2(static_cast<unsigned>(t[0]) | (static_cast<unsigned>(t[1]) << 16),
                                                static_cast<unsigned>(t[2]) | (static_cast<unsigned>(t[3]) << 16));
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < kEmulateLane; ++k) {
    if (k < valid) p[k] = t[k];
  }
}

// x' of a lane into an fp32 row of any 4-byte alignment, NaNs canonical.
__device__ __forceinline__ void store_lane_f32_canonical(float* p, int valid, const float (&v)[kEmulateLane]) {
  float c[kEmulateLane];
#pragma unroll
  for (int k = 0; k < kEmulateLane; ++k) c[k] = canonical_nan(v[k]);
  if (valid == kEmulateLane && (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0) {
    *reinterpret_cast<float4*>(p) = make_float4(c[0], c[1], c[2], c[3]);
    return;
  }
#pragma unroll
  for (int k = 0; k < kEmulateLane; ++k) {
    if (k < valid) p[k] = c[k];
  }
}

// Min, max and finiteness of a group spread over `lanes` consecutive lanes of the block (a power
// of two from 4 to 256, uniform over the block): shuffles inside a warp, shared memory across the
// warps of groups wider than one. Every thread of the block calls it (it holds barriers when
// lanes > 32). min and max are exact, so the result does not depend on the order of the reduction
// (the sign of a zero min or max never matters to the group map: lane_ops.cuh, group_stats).
__device__ __forceinline__ GroupStats block_group_stats(const float (&v)[kEmulateLane], int valid, int lanes,
                                                        float2* warp_stats) {
  if (lanes <= 32) return group_stats<kEmulateLane>(v, valid, lanes);
  const GroupStats w = group_stats<kEmulateLane>(v, valid, 32);
  const int warp = threadIdx.x >> 5;
  if ((threadIdx.x & 31) == 0) warp_stats[warp] = make_float2(w.mn, w.mx);
  __syncthreads();
  const int warps = lanes >> 5;
  const int first = warp & ~(warps - 1);
  float mn = warp_stats[first].x;
  float mx = warp_stats[first].y;
  for (int i = 1; i < warps; ++i) {
    mn = fmin_nan(mn, warp_stats[first + i].x);
    mx = fmax_nan(mx, warp_stats[first + i].y);
  }
  __syncthreads();  // the next call overwrites warp_stats
  return {mn, mx, is_finite(mn) && is_finite(mx)};
}

// Whether any lane of the group (as in block_group_stats) has `flag` set.
__device__ __forceinline__ bool block_group_any(bool flag, int lanes, int* warp_flags) {
  if (lanes <= 32) {
    int f = flag ? 1 : 0;
    for (int off = 1; off < lanes; off <<= 1) f |= __shfl_xor_sync(0xFFFFFFFFu, f, off);
    return f != 0;
  }
  const int warp = threadIdx.x >> 5;
  const unsigned any = __any_sync(0xFFFFFFFFu, flag);
  if ((threadIdx.x & 31) == 0) warp_flags[warp] = any ? 1 : 0;
  __syncthreads();
  const int warps = lanes >> 5;
  const int first = warp & ~(warps - 1);
  int f = 0;
  for (int i = 0; i < warps; ++i) f |= warp_flags[first + i];
  __syncthreads();
  return f != 0;
}

// One quantize -> dequantize of a lane under its group's map: what a receiver of the codes
// computes (docs/numerics.md 2; every element NaN in a poisoned group). Any bit width 2..8: the
// code is the low byte of encode_bits(), its value code_value_of_bits().
__device__ __forceinline__ void requantize_lane(const GroupMap& map, bool symmetric, int bits,
                                                const float (&v)[kEmulateLane], float (&out)[kEmulateLane]) {
  if (map.poisoned) {
#pragma unroll
    for (int k = 0; k < kEmulateLane; ++k) out[k] = poisoned_value();
    return;
  }
  const DecodeParams dp = decode_params_of(map, symmetric, bits);
  const float magic = encode_magic(map);
#pragma unroll
  for (int k = 0; k < kEmulateLane; ++k) {
    out[k] = decode_finite_value(dp.s, dp.z, code_value_of_bits(encode_bits(map, magic, v[k])));
  }
}

}  // namespace echo::cuda::device
