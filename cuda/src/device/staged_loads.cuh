// Asynchronous copies (cp.async) of a lane's input and compensator state for the next block
// iteration into shared memory while the current one computes. The compensated variants hold the
// state in registers through an iteration and have no room to load the next one ahead in
// registers, as the uncompensated ones do; without it every iteration waits for its loads. Each
// thread copies and later reads back only its own words, so completing its own copy groups
// (cp.async.wait_group) is the only synchronization these buffers need.
// STATE_BYTES: bytes per element of one average the buffers hold: 4 (fp32 or bf16 state), 2 (bf16
// state only) or 0 (input only). The 8-element lanes of the local residual stage either state
// type; the 16-element lanes of the global residual only bf16 state (staging fp32 state there made
// the call slower, docs/performance.md, "Staged loads in shared memory"); the uncompensated 4-bit
// 32-element lanes their input.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernel_args.h"
#include "device/numerics.cuh"

namespace echo::cuda::device {

__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's most recent copy groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Two buffers of one block, each [word][thread] of 16-byte words, so that the 32 lanes of a warp
// touch 512 consecutive bytes per word (no bank conflicts). A lane's words: its input (E elements
// in the call's dtype), then m1 and m2 (E elements each, bf16 or fp32).
template <DType D, int E, int STATE_BYTES>
struct StagedLayout {
  using T = typename Elem<D>::T;
  static constexpr int kInWords = E * static_cast<int>(sizeof(T)) / 16;
  static constexpr int kStateWords = E * STATE_BYTES / 16;  // one average (bf16 fills E / 8)
  static constexpr int kBf16Words = STATE_BYTES == 0 ? 0 : E * 2 / 16;
  static constexpr int kWords = kInWords + 2 * kStateWords;
  static constexpr std::size_t kBytes = std::size_t{2} * kWords * kBlockThreads * 16;
};

template <DType D, int E, int STATE_BYTES>
struct StagedLane {
  static constexpr bool F32 = STATE_BYTES == 4;
  using L = StagedLayout<D, E, STATE_BYTES>;
  using T = typename L::T;
  uint4* base;  // the block's dynamic shared memory

  __device__ __forceinline__ uint4* word(int buf, int w) const {
    return base + (buf * L::kWords + w) * kBlockThreads + threadIdx.x;
  }

  // Whether a call's state fits these buffers.
  static __device__ __forceinline__ bool holds(const CompensatorArgs& c) {
    return STATE_BYTES != 2 || c.bf16_state;
  }

  // Issues the copies of a whole lane at element e0 (input 16-byte aligned, state that holds())
  // into `buf`, then closes the copy group; `copy` false closes an empty group, so every iteration
  // counts one.
  __device__ __forceinline__ void issue(bool copy, const void* in, const CompensatorArgs& c, std::size_t e0,
                                        int buf) const {
    if (copy) {
      const uint4* x = reinterpret_cast<const uint4*>(static_cast<const T*>(in) + e0);
#pragma unroll
      for (int i = 0; i < L::kInWords; ++i) cp_async_16(word(buf, i), x + i);
      if constexpr (STATE_BYTES == 0) {
      } else if (!F32 || c.bf16_state) {
        copy_state<L::kBf16Words>(reinterpret_cast<const std::uint16_t*>(c.m1) + e0,
                                  reinterpret_cast<const std::uint16_t*>(c.m2) + e0, c, buf);
      } else {
        copy_state<L::kStateWords>(c.m1 + e0, c.m2 + e0, c, buf);
      }
    }
    cp_async_commit();
  }
  template <int kW, typename S>
  __device__ __forceinline__ void copy_state(const S* m1, const S* m2, const CompensatorArgs& c, int buf) const {
#pragma unroll
    for (int i = 0; i < kW; ++i) cp_async_16(word(buf, L::kInWords + i), reinterpret_cast<const uint4*>(m1) + i);
    if (c.mode == CompensatorMode::kDual) {
#pragma unroll
      for (int i = 0; i < kW; ++i) {
        cp_async_16(word(buf, L::kInWords + L::kStateWords + i), reinterpret_cast<const uint4*>(m2) + i);
      }
    }
  }

  // The lane's input values and state from buffer `buf` (its copies complete).
  __device__ __forceinline__ void read(const CompensatorArgs& c, int buf, float (&x)[E], float (&m1)[E],
                                       float (&m2)[E]) const {
    constexpr int kPer = 16 / static_cast<int>(sizeof(T));
#pragma unroll
    for (int i = 0; i < L::kInWords; ++i) {
      const uint4 u = *word(buf, i);
      const T* t = reinterpret_cast<const T*>(&u);
#pragma unroll
      for (int k = 0; k < kPer; ++k) x[i * kPer + k] = Elem<D>::load(t[k]);
    }
    if constexpr (STATE_BYTES == 0) return;
    const bool dual = c.mode == CompensatorMode::kDual;
    if (!F32 || c.bf16_state) {
#pragma unroll
      for (int i = 0; i < L::kBf16Words; ++i) {
        unpack_bf16_word(*word(buf, L::kInWords + i), &m1[8 * i]);
        if (dual) unpack_bf16_word(*word(buf, L::kInWords + L::kStateWords + i), &m2[8 * i]);
      }
    } else {
#pragma unroll
      for (int i = 0; i < L::kStateWords; ++i) {
        unpack_f32_word(*word(buf, L::kInWords + i), &m1[4 * i]);
        if (dual) unpack_f32_word(*word(buf, L::kInWords + L::kStateWords + i), &m2[4 * i]);
      }
    }
  }

  static __device__ __forceinline__ void unpack_f32_word(const uint4& u, float* v) {
    v[0] = __uint_as_float(u.x);
    v[1] = __uint_as_float(u.y);
    v[2] = __uint_as_float(u.z);
    v[3] = __uint_as_float(u.w);
  }
  static __device__ __forceinline__ void unpack_bf16_word(const uint4& u, float* v) {
    const unsigned h[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      v[2 * k] = bf16_bits_to_float(static_cast<std::uint16_t>(h[k] & 0xFFFFu));
      v[2 * k + 1] = bf16_bits_to_float(static_cast<std::uint16_t>(h[k] >> 16));
    }
  }
};

}  // namespace echo::cuda::device
