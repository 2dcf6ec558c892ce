// The Hadamard rotation of docs/numerics.md 2.6 on a group spread over `lanes` consecutive lanes of
// the block, E elements each (element j * E + k of the group is value k of the group's lane j). The
// numerics are numerics/hadamard.h's: the sign vector, one butterfly half per element and stage,
// the power-of-two normalisations. Stages run in the reference's order (h = 1, 2, 4, ..., g / 2);
// the butterflies of one stage are independent, so computing them in parallel gives its bits:
// h < E inside a thread, E <= h < 32 E between the lanes of a warp (shuffles), larger h between
// warps (shared memory). Every thread of the block calls these (uniform `lanes`; barriers when the
// group spans warps, shuffles of the whole warp otherwise); a lane whose group is not full
// (`rotate` false: the message's partial last group) takes part in the exchanges and keeps its
// values. The stages h < E are hadamard_lanes.cuh's; the lanes' stages stay here, because a group
// of g > 128 spans warps (shared memory), which hadamard_lanes.cuh (groups inside a warp) does not
// serve, and its per-group lane mask would change this kernel's code.
#pragma once

#include <cstdint>

#include "echo/numerics/hadamard.h"
#include "device/hadamard_lanes.cuh"
#include "device/lane_ops.cuh"

namespace echo::cuda::device {

// Bit k set: element j * E + k of the group is negated (j the lane's index in its group).
template <int E>
__device__ __forceinline__ unsigned rotation_sign_bits(int j) {
  unsigned bits = 0;
#pragma unroll
  for (int k = 0; k < E; ++k) {
    bits |= numerics::hadamard_sign_negative(static_cast<std::uint32_t>(j * E + k)) ? 1u << k : 0u;
  }
  return bits;
}

// The flagged elements negated (exact: the sign bit flipped, as -x).
template <int E>
__device__ __forceinline__ void apply_rotation_signs(unsigned sign_bits, float (&v)[E]) {
#pragma unroll
  for (int k = 0; k < E; ++k) v[k] = __uint_as_float(__float_as_uint(v[k]) ^ (((sign_bits >> k) & 1u) << 31));
}

// The butterfly stages h = 1 .. g / 2 of the lane's values (numerics::hadamard_butterflies). `exchange` is kBlockThreads float4s of
// shared memory (E == 4), used when lanes > 32.
template <int E>
__device__ __forceinline__ void rotation_butterflies(int lanes, float (&w)[E], float4* exchange) {
  static_assert(E == 4, "the cross-warp exchange moves one float4 per lane");
  butterflies_in_lane<E>(w);  // h < E
  // Lane distance d = h / E inside the warp.
  for (int d = 1; d < lanes && d < 32; d *= 2) {
    const bool upper = (threadIdx.x & d) != 0;
#pragma unroll
    for (int k = 0; k < E; ++k) {
      const float other = __shfl_xor_sync(0xFFFFFFFFu, w[k], d);
      w[k] = upper ? numerics::butterfly_upper(other, w[k]) : numerics::butterfly_lower(w[k], other);
    }
  }
  // Between warps: every lane publishes its values, then reads its partner's.
  for (int d = 32; d < lanes; d *= 2) {
    exchange[threadIdx.x] = make_float4(w[0], w[1], w[2], w[3]);
    __syncthreads();
    const float4 o = exchange[threadIdx.x ^ d];
    __syncthreads();  // the next stage overwrites exchange
    const float other[E] = {o.x, o.y, o.z, o.w};
    const bool upper = (threadIdx.x & d) != 0;
#pragma unroll
    for (int k = 0; k < E; ++k) {
      w[k] = upper ? numerics::butterfly_upper(other[k], w[k]) : numerics::butterfly_lower(w[k], other[k]);
    }
  }
}

// What a rotation needs of the lane: whether its group is rotated, the group's lanes, the lane's
// signs and the normalisations (numerics::rotate_group, unrotate_group).
struct RotationLane {
  bool rotate;
  int lanes;
  unsigned sign_bits;
  float forward_factor;
  float inverse_factor;
};

// Forward: signs, butterflies, times 2^-ceil(l / 2).
template <int E>
__device__ __forceinline__ void rotate_lane(const RotationLane& r, float (&v)[E], float4* exchange) {
  float w[E];
#pragma unroll
  for (int k = 0; k < E; ++k) w[k] = v[k];
  apply_rotation_signs<E>(r.sign_bits, w);
  rotation_butterflies<E>(r.lanes, w, exchange);
  if (!r.rotate) return;
#pragma unroll
  for (int k = 0; k < E; ++k) v[k] = numerics::mul_rn(w[k], r.forward_factor);
}

// Inverse: butterflies, times 2^-floor(l / 2), signs.
template <int E>
__device__ __forceinline__ void unrotate_lane(const RotationLane& r, float (&v)[E], float4* exchange) {
  float w[E];
#pragma unroll
  for (int k = 0; k < E; ++k) w[k] = v[k];
  rotation_butterflies<E>(r.lanes, w, exchange);
  if (!r.rotate) return;
#pragma unroll
  for (int k = 0; k < E; ++k) v[k] = numerics::mul_rn(w[k], r.inverse_factor);
  apply_rotation_signs<E>(r.sign_bits, v);
}

}  // namespace echo::cuda::device
