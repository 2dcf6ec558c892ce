// Thread-level access to a lane's E consecutive elements: the input in its dtype, fp32 state, and
// the lane's packed codes. Vector (16-byte) accesses when the run is whole and aligned, element
// accesses otherwise (offset-shifted user buffers, the partial last group).
#pragma once

#include <cstdint>

#include "device/numerics.cuh"

namespace echo::cuda::device {

template <DType D, int E>
__device__ __forceinline__ void load_elems(const void* base, std::size_t e0, int valid, bool aligned,
                                           float (&v)[E]) {
  using T = typename Elem<D>::T;
  const T* p = static_cast<const T*>(base) + e0;
  if (valid == E && aligned) {
    constexpr int kWords = E * sizeof(T) / 16;
    const uint4* q = reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int w = 0; w < kWords; ++w) {
      const uint4 u = q[w];
      const T* t = reinterpret_cast<const T*>(&u);
      constexpr int kPer = 16 / sizeof(T);
#pragma unroll
      for (int k = 0; k < kPer; ++k) v[w * kPer + k] = Elem<D>::load(t[k]);
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < E; ++k) v[k] = k < valid ? Elem<D>::load(p[k]) : 0.0f;
}

// NOT_NAN: every value is known not to be NaN (the hardware conversion suffices).
template <DType D, int E, bool NOT_NAN = false>
__device__ __forceinline__ void store_elems(void* base, std::size_t e0, int valid, bool aligned,
                                            const float (&v)[E]) {
  using T = typename Elem<D>::T;
  T* p = static_cast<T*>(base) + e0;
  if (valid == E && aligned) {
    constexpr int kPer = 16 / sizeof(T);
    constexpr int kWords = E / kPer;
    uint4* q = reinterpret_cast<uint4*>(p);
#pragma unroll
    for (int w = 0; w < kWords; ++w) {
      uint4 u;
      if constexpr (NOT_NAN && sizeof(T) == 2) {
        // One conversion instruction per pair (round to nearest even, as the scalar one).
        unsigned* h = reinterpret_cast<unsigned*>(&u);
#pragma unroll
        for (int k = 0; k < 4; ++k) h[k] = Elem<D>::store_pair_not_nan(v[w * kPer + 2 * k], v[w * kPer + 2 * k + 1]);
      } else {
        T* t = reinterpret_cast<T*>(&u);
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
          t[k] = NOT_NAN ? Elem<D>::store_not_nan(v[w * kPer + k]) : Elem<D>::store(v[w * kPer + k]);
        }
      }
      q[w] = u;
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < E; ++k) {
    if (k < valid) p[k] = Elem<D>::store(v[k]);
  }
}

// fp32 arrays we allocate ourselves (state, staging): always 16-byte aligned at lane starts.
template <int E>
__device__ __forceinline__ void load_f32(const float* p, int valid, float (&v)[E]) {
  if (valid == E) {
#pragma unroll
    for (int w = 0; w < E / 4; ++w) {
      const float4 f = reinterpret_cast<const float4*>(p)[w];
      v[4 * w] = f.x; v[4 * w + 1] = f.y; v[4 * w + 2] = f.z; v[4 * w + 3] = f.w;
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < E; ++k) v[k] = k < valid ? p[k] : 0.0f;
}

template <int E>
__device__ __forceinline__ void store_f32(float* p, int valid, const float (&v)[E]) {
  if (valid == E) {
#pragma unroll
    for (int w = 0; w < E / 4; ++w) {
      reinterpret_cast<float4*>(p)[w] = make_float4(v[4 * w], v[4 * w + 1], v[4 * w + 2], v[4 * w + 3]);
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < E; ++k) {
    if (k < valid) p[k] = v[k];
  }
}

// store_f32 of values that may hold a NaN with any payload (x'): NaNs stored as the canonical one.
template <int E>
__device__ __forceinline__ void store_f32_canonical(float* p, int valid, const float (&v)[E]) {
  float c[E];
#pragma unroll
  for (int k = 0; k < E; ++k) c[k] = v[k];
  canonicalize_lane<E>(c);
  store_f32<E>(p, valid, c);
}

// bf16 arrays we allocate ourselves (bf16 compensator state): a lane of E elements starts at a
// multiple of E, so whole lanes are 8-byte (E = 4) or 16-byte (E >= 8) aligned.
template <int E>
__device__ __forceinline__ void load_bf16(const std::uint16_t* p, int valid, float (&v)[E]) {
  if (valid == E) {
    if constexpr (E == 4) {
      const uint2 u = *reinterpret_cast<const uint2*>(p);
      v[0] = bf16_bits_to_float(static_cast<std::uint16_t>(u.x & 0xFFFFu));
      v[1] = bf16_bits_to_float(static_cast<std::uint16_t>(u.x >> 16));
      v[2] = bf16_bits_to_float(static_cast<std::uint16_t>(u.y & 0xFFFFu));
      v[3] = bf16_bits_to_float(static_cast<std::uint16_t>(u.y >> 16));
    } else {
      static_assert(E % 8 == 0, "lanes of 4 or a multiple of 8 elements");
#pragma unroll
      for (int w = 0; w < E / 8; ++w) {
        const uint4 u = reinterpret_cast<const uint4*>(p)[w];
        const unsigned h[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          v[8 * w + 2 * k] = bf16_bits_to_float(static_cast<std::uint16_t>(h[k] & 0xFFFFu));
          v[8 * w + 2 * k + 1] = bf16_bits_to_float(static_cast<std::uint16_t>(h[k] >> 16));
        }
      }
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < E; ++k) v[k] = k < valid ? bf16_bits_to_float(p[k]) : 0.0f;
}

// A whole lane rounded to bf16 as the reference does (round to nearest even, NaN canonical), two
// values per word, the first in the low half; store_bf16 stores them. A lane without NaN converts
// in pairs in hardware (cvt.rn.bf16x2.f32 rounds to nearest even as float_to_bf16_bits does for
// every value but NaN): one instruction per pair instead of about five per element.
template <int E>
__device__ __forceinline__ void bf16_pair_words(const float (&v)[E], unsigned (&h)[E / 2]) {
  if (!any_nan<E>(v)) {
#pragma unroll
    for (int k = 0; k < E / 2; ++k) h[k] = Elem<DType::kBFloat16>::store_pair_not_nan(v[2 * k], v[2 * k + 1]);
    return;
  }
#pragma unroll
  for (int k = 0; k < E / 2; ++k) {
    h[k] = static_cast<unsigned>(float_to_bf16_bits(v[2 * k])) |
           (static_cast<unsigned>(float_to_bf16_bits(v[2 * k + 1])) << 16);
  }
}

template <int E>
__device__ __forceinline__ void store_bf16(std::uint16_t* p, int valid, const float (&v)[E]) {
  if (valid == E) {
    unsigned h[E / 2];
    bf16_pair_words<E>(v, h);
    if constexpr (E == 4) {
      *reinterpret_cast<uint2*>(p) = make_uint2(h[0], h[1]);
    } else {
#pragma unroll
      for (int w = 0; w < E / 8; ++w) {
        reinterpret_cast<uint4*>(p)[w] = make_uint4(h[4 * w], h[4 * w + 1], h[4 * w + 2], h[4 * w + 3]);
      }
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < E; ++k) {
    if (k < valid) p[k] = float_to_bf16_bits(v[k]);
  }
}

// Bulk prefetch of a byte range into L2 (one instruction, no registers, no completion to wait
// for): a later load of the range hits L2 instead of DRAM. The range is widened to 16-byte
// boundaries, so it must lie in memory we allocate with that padding (the workspace slots).
__device__ __forceinline__ void prefetch_l2(const void* p, std::size_t bytes) {
  const std::uintptr_t b = reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{15};
  const std::uintptr_t e = (reinterpret_cast<std::uintptr_t>(p) + bytes + 15) & ~std::uintptr_t{15};
  if (e <= b) return;
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(b), "r"(static_cast<unsigned>(e - b))
               : "memory");
}

// A lane's codes: E codes of BITS bits packed LSB-first (docs/wire-format.md), as 32-bit words.
template <int BITS, int E>
struct PackedCodes {
  static constexpr int kWords = E * BITS / 32;
  static constexpr int kBytes = E * BITS / 8;
  static constexpr int kPerWord = 32 / BITS;
  std::uint32_t w[kWords];

  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int i = 0; i < kWords; ++i) w[i] = 0u;
  }
  __device__ __forceinline__ void set(int k, unsigned code) {
    w[k / kPerWord] |= code << ((k % kPerWord) * BITS);
  }
  __device__ __forceinline__ unsigned get(int k) const {
    return (w[k / kPerWord] >> ((k % kPerWord) * BITS)) & ((1u << BITS) - 1u);
  }
  // Packs E encode_bits() results (each code in its low byte): byte permutes instead of one shift
  // and one OR per code. For 4 bits, b_odd * 16 + b_even has the code pair in its low byte.
  __device__ __forceinline__ void pack(const unsigned (&b)[E]) {
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      unsigned p[4];
      if constexpr (BITS == 8) {
#pragma unroll
        for (int j = 0; j < 4; ++j) p[j] = b[4 * i + j];
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) p[j] = b[8 * i + 2 * j + 1] * 16u + b[8 * i + 2 * j];
      }
      w[i] = prmt(prmt(p[0], p[1], 0x0040u), prmt(p[2], p[3], 0x0040u), 0x5410u);
    }
  }
  // float(q) of every code, exactly: a byte permute builds the float 2^23 + q, one subtraction
  // removes 2^23 (the same values as get(k) converted, for every word: all 2^32 words of both
  // widths, tests/cuda/test_numerics_intrinsics.cpp; pack() is checked there against set()).
  __device__ __forceinline__ void code_values(float (&q)[E]) const {
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      if constexpr (BITS == 8) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          q[4 * i + j] = __fsub_rn(__uint_as_float(prmt(w[i], 0x4B000000u, 0x7440u | j)), 8388608.0f);
        }
      } else {
        const unsigned even = w[i] & 0x0F0F0F0Fu;
        const unsigned odd = (w[i] >> 4) & 0x0F0F0F0Fu;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          q[8 * i + 2 * j] = __fsub_rn(__uint_as_float(prmt(even, 0x4B000000u, 0x7440u | j)), 8388608.0f);
          q[8 * i + 2 * j + 1] = __fsub_rn(__uint_as_float(prmt(odd, 0x4B000000u, 0x7440u | j)), 8388608.0f);
        }
      }
    }
  }
  // Plain stores: the destination may be a peer's memory; the release of the tile's flag
  // publishes them.
  __device__ __forceinline__ void store(void* dst) const {
    if constexpr (kWords % 4 == 0) {
#pragma unroll
      for (int i = 0; i < kWords / 4; ++i) {
        reinterpret_cast<uint4*>(dst)[i] = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
      }
    } else if constexpr (kWords == 2) {
      *reinterpret_cast<uint2*>(dst) = make_uint2(w[0], w[1]);
    } else {
      static_assert(kWords == 1, "lane codes are 4, 8 or 16k bytes");
      *reinterpret_cast<unsigned*>(dst) = w[0];
    }
  }
  // Loads of data a peer wrote in this kernel: .cg skips the non-coherent L1.
  __device__ __forceinline__ void load(const void* src) {
    if constexpr (kWords % 4 == 0) {
#pragma unroll
      for (int i = 0; i < kWords / 4; ++i) {
        const uint4 u = __ldcg(reinterpret_cast<const uint4*>(src) + i);
        w[4 * i] = u.x; w[4 * i + 1] = u.y; w[4 * i + 2] = u.z; w[4 * i + 3] = u.w;
      }
    } else if constexpr (kWords == 2) {
      const uint2 u = __ldcg(reinterpret_cast<const uint2*>(src));
      w[0] = u.x; w[1] = u.y;
    } else {
      w[0] = __ldcg(reinterpret_cast<const unsigned*>(src));
    }
  }
};

}  // namespace echo::cuda::device
