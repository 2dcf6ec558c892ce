// Thread- and block-level steps of the one-GPU emulation kernels: E-element lanes of a rank's
// row (any alignment), a group's statistics over up to 256 lanes of a block, and one
// quantize -> dequantize of a lane under a group map. The arithmetic is the shared device
// numerics' (numerics.cuh, lane_ops.cuh); only the data movement lives here.
#pragma once

#include <cstdint>

#include "device/lane_ops.cuh"

namespace echo::cuda::device {

// Elements per thread. Measured on one H200 at P = 4, 16 Mi bf16 (docs/performance.md, "One-GPU
// emulation"): eight per thread halve each group's share of statistics and map but need ~165
// registers, and the goal's configuration ran at 0.43 of a copy against 0.57 with four.
inline constexpr int kEmulateLane = 4;

// Whether E-element lanes starting at multiples of E elements from `p` are vector-aligned.
template <DType D, int E>
__device__ __forceinline__ bool lane_aligned(const void* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & (E * sizeof(typename Elem<D>::T) - 1)) == 0;
}

// A lane's values in the dtype as floats, zeros past `valid`; 16-byte loads (one 8-byte load for
// four 2-byte elements) when aligned.
template <DType D, int E>
__device__ __forceinline__ void load_lane(const void* base, std::size_t e0, int valid, bool aligned,
                                          float (&v)[E]) {
  using T = typename Elem<D>::T;
  if constexpr (E * sizeof(T) % 16 == 0) {
    load_elems<D, E>(base, e0, valid, aligned, v);
  } else {
    static_assert(E == 4 && sizeof(T) == 2, "lanes of 16-byte multiples, or four 2-byte elements");
    const T* p = static_cast<const T*>(base) + e0;
    if (valid == E && aligned) {
      const uint2 u = *reinterpret_cast<const uint2*>(p);
      v[0] = Elem<D>::load(static_cast<T>(u.x & 0xFFFFu));
      v[1] = Elem<D>::load(static_cast<T>(u.x >> 16));
      v[2] = Elem<D>::load(static_cast<T>(u.y & 0xFFFFu));
      v[3] = Elem<D>::load(static_cast<T>(u.y >> 16));
      return;
    }
#pragma unroll
    for (int k = 0; k < E; ++k) v[k] = k < valid ? Elem<D>::load(p[k]) : 0.0f;
  }
}

// A whole lane's 16 or 8 bytes in one store instruction. Written as PTX because nvcc 13.0 splits the
// vector stores of the emulation kernels (C++ stores of uint2 or float4) into 4-byte ones (STG.E
// only in their SASS), four times the store instructions for the same bytes.
__device__ __forceinline__ void store_words4(void* p, unsigned a, unsigned b, unsigned c, unsigned d) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}
__device__ __forceinline__ void store_words2(void* p, unsigned a, unsigned b) {
  asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(p), "r"(a), "r"(b) : "memory");
}
template <int E>
__device__ __forceinline__ void store_floats(float* p, const float (&v)[E]) {
  static_assert(E % 4 == 0, "whole float4s");
#pragma unroll
  for (int w = 0; w < E / 4; ++w) {
    store_words4(p + 4 * w, __float_as_uint(v[4 * w]), __float_as_uint(v[4 * w + 1]), __float_as_uint(v[4 * w + 2]),
                 __float_as_uint(v[4 * w + 3]));
  }
}

// store_state (lane_ops.cuh) with the whole lanes' stores in store_words2/4: a lane's updated
// averages, bf16 state rounded as the reference rounds each update.
template <int E>
__device__ __forceinline__ void store_state_lane(const CompensatorArgs& c, std::size_t e0, int valid,
                                                 const float (&m1)[E], const float (&m2)[E]) {
  static_assert(E == 4, "a lane of bf16 state is one 8-byte word pair");
  if (valid != E) {
    store_state<E>(c, e0, valid, m1, m2);
    return;
  }
  const bool dual = c.mode == CompensatorMode::kDual;
  if (c.bf16_state) {
    unsigned h[E / 2];
    bf16_pair_words<E>(m1, h);
    store_words2(reinterpret_cast<std::uint16_t*>(c.m1) + e0, h[0], h[1]);
    if (dual) {
      bf16_pair_words<E>(m2, h);
      store_words2(reinterpret_cast<std::uint16_t*>(c.m2) + e0, h[0], h[1]);
    }
    return;
  }
  store_floats<E>(c.m1 + e0, m1);
  if (dual) store_floats<E>(c.m2 + e0, m2);
}

// Rounds a lane to the dtype (NaN canonical) and stores its `valid` elements; returns the stored
// values as floats (the delivered output, dtype_rne(v)).
template <DType D, int E>
__device__ __forceinline__ void store_lane(void* base, std::size_t e0, int valid, bool aligned,
                                           const float (&v)[E], float (&stored)[E]) {
  using T = typename Elem<D>::T;
  static_assert(E * sizeof(T) % 8 == 0, "lanes of 8-byte multiples");
  T t[E];
#pragma unroll
  for (int k = 0; k < E; ++k) {
    t[k] = Elem<D>::store(v[k]);
    stored[k] = Elem<D>::load(t[k]);
  }
  T* p = static_cast<T*>(base) + e0;
  if (valid == E && aligned) {
    if constexpr (E * sizeof(T) % 16 == 0) {
      constexpr int kPer = 16 / sizeof(T);
#pragma unroll
      for (int w = 0; w < E / kPer; ++w) {
        uint4 u;
        T* dst = reinterpret_cast<T*>(&u);
#pragma unroll
        for (int k = 0; k < kPer; ++k) dst[k] = t[w * kPer + k];
        store_words4(reinterpret_cast<uint4*>(p) + w, u.x, u.y, u.z, u.w);
      }
    } else {
      store_words2(p, static_cast<unsigned>(t[0]) | (static_cast<unsigned>(t[1]) << 16),
                   static_cast<unsigned>(t[2]) | (static_cast<unsigned>(t[3]) << 16));
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < E; ++k) {
    if (k < valid) p[k] = t[k];
  }
}

// x' of a lane into an fp32 row of any 4-byte alignment, NaNs canonical.
template <int E>
__device__ __forceinline__ void store_lane_f32_canonical(float* p, int valid, const float (&v)[E]) {
  float c[E];
#pragma unroll
  for (int k = 0; k < E; ++k) c[k] = canonical_nan(v[k]);
  if (valid == E && (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0) {
    store_floats<E>(p, c);
    return;
  }
#pragma unroll
  for (int k = 0; k < E; ++k) {
    if (k < valid) p[k] = c[k];
  }
}

// Min, max and finiteness of a group spread over `lanes` consecutive lanes of the block (a power
// of two from 4 to 256, uniform over the block): shuffles inside a warp, shared memory across the
// warps of groups wider than one. Every thread of the block calls it (it holds barriers when
// lanes > 32). min and max are exact, so the result does not depend on the order of the reduction
// (the sign of a zero min or max never matters to the group map: lane_ops.cuh, group_stats).
template <int E>
__device__ __forceinline__ GroupStats block_group_stats(const float (&v)[E], int valid, int lanes,
                                                        float2* warp_stats) {
  if (lanes <= 32) return group_stats<E>(v, valid, lanes);
  const GroupStats w = group_stats<E>(v, valid, 32);
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

// One quantize -> dequantize of a lane under a wide group's map (docs/numerics.md 2.4 steps 4-5:
// encode_bits_wide, dequantize_wide_value; the zero-point as stored, 2^(b-1) when symmetric).
template <int E>
__device__ __forceinline__ void requantize_lane_wide(const GroupMap& map, const float (&v)[E], float (&out)[E]) {
  const float z = half_bits_to_float(map.zero_point);
  const float magic = encode_magic(map);
#pragma unroll
  for (int k = 0; k < E; ++k) {
    out[k] = numerics::dequantize_wide_value(map.wide_scale, z,
                                             code_value_of_bits(numerics::encode_bits_wide(map, magic, v[k])));
  }
}

// One quantize -> dequantize of a lane under its group's map: what a receiver of the codes
// computes (docs/numerics.md 2; every element NaN in a poisoned group). Any bit width 2..8: the
// code is the low byte of encode_bits(), its value code_value_of_bits(). kWide: the map may be a
// wide one (lane_group_map's second pass); the default instantiation has no wide branch.
template <int E, bool kWide = false>
__device__ __forceinline__ void requantize_lane(const GroupMap& map, bool symmetric, int bits,
                                                const float (&v)[E], float (&out)[E]) {
  if constexpr (kWide) {
    if (map.wide) {
      requantize_lane_wide<E>(map, v, out);
      return;
    }
  }
  if (map.poisoned) {
#pragma unroll
    for (int k = 0; k < E; ++k) out[k] = poisoned_value();
    return;
  }
  const DecodeParams dp = decode_params_of(map, symmetric, bits);
  const float magic = encode_magic(map);
#pragma unroll
  for (int k = 0; k < E; ++k) {
    out[k] = decode_finite_value(dp.s, dp.z, code_value_of_bits(encode_bits(map, magic, v[k])));
  }
}

}  // namespace echo::cuda::device
