// The Hadamard rotation of docs/numerics.md 2.6 on a group held by `lanes` consecutive lanes of one
// warp (lanes a power of two <= 32), E consecutive elements each: element j * E + k of the group
// is value k of the group's lane j. Generic over E and the lanes per group, for every kernel whose
// groups fit in a warp. The numerics are numerics/hadamard.h's: its sign vector, the butterfly
// halves (butterfly_lower, butterfly_upper) and the normalisations (hadamard_*_factor). The stages run in the
// reference's order (h = 1, 2, 4, ..., g / 2); the butterflies of one stage are independent, so
// computing them in parallel gives its bits: h < E inside a thread, h >= E between the group's
// lanes (shuffles on the group's own lane mask, so a branch that is uniform over the group, such as
// "the group is full" or "the group is poisoned", may enclose a call).
#pragma once

#include <cstdint>

#include "echo/numerics/hadamard.h"
#include "echo/numerics/host_device.h"

namespace echo::cuda::device {

// The lanes of one group inside its warp.
struct GroupLanes {
  int lanes;          // lanes per group (a power of two, <= 32)
  int lane_in_group;  // this lane's index j in its group
  unsigned mask;      // the group's lanes in the warp, for the shuffles
};

__device__ __forceinline__ GroupLanes group_lanes(int lanes) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const int base = lane & ~(lanes - 1);
  const unsigned mask = lanes == 32 ? 0xFFFFFFFFu : ((1u << lanes) - 1u) << base;
  return {lanes, lane - base, mask};
}

// The flagged elements of the lane negated (numerics::hadamard_sign_negative of j * E + k; exact).
template <int E>
__device__ __forceinline__ void negate_flagged(const GroupLanes& gl, float (&v)[E]) {
#pragma unroll
  for (int k = 0; k < E; ++k) {
    if (numerics::hadamard_sign_negative(static_cast<std::uint32_t>(gl.lane_in_group * E + k))) v[k] = -v[k];
  }
}

// The stages h < E of numerics::hadamard_butterflies: both elements of each pair in this lane.
// Shared with the emulation's rotation (kernels/emulate/rotation.cuh).
template <int E>
__device__ __forceinline__ void butterflies_in_lane(float (&w)[E]) {
#pragma unroll
  for (int h = 1; h < E; h *= 2) {
#pragma unroll
    for (int k = 0; k < E; ++k) {
      if ((k & h) != 0) continue;
      const float lo = w[k];
      const float hi = w[k + h];
      w[k] = numerics::butterfly_lower(lo, hi);
      w[k + h] = numerics::butterfly_upper(lo, hi);
    }
  }
}

// numerics::hadamard_butterflies on the group, this lane's part: the stages h < E in the lane,
// then h = d * E between the group's lanes (lane distance d).
template <int E>
__device__ __forceinline__ void butterflies_lanes(const GroupLanes& gl, float (&w)[E]) {
  butterflies_in_lane<E>(w);
  for (int d = 1; d < gl.lanes; d *= 2) {
    const bool upper = (gl.lane_in_group & d) != 0;
#pragma unroll
    for (int k = 0; k < E; ++k) {
      const float other = __shfl_xor_sync(gl.mask, w[k], d);
      w[k] = upper ? numerics::butterfly_upper(other, w[k]) : numerics::butterfly_lower(w[k], other);
    }
  }
}

// numerics::rotate_group on the group: signs, butterflies, times 2^-ceil(log2(g) / 2).
template <int E>
__device__ __forceinline__ void rotate_lanes(const GroupLanes& gl, float (&v)[E]) {
  negate_flagged<E>(gl, v);
  butterflies_lanes<E>(gl, v);
  const float f = numerics::hadamard_forward_factor(gl.lanes * E);
#pragma unroll
  for (int k = 0; k < E; ++k) v[k] = numerics::mul_rn(v[k], f);
}

// numerics::unrotate_group on the group: butterflies, times 2^-floor(log2(g) / 2), signs.
template <int E>
__device__ __forceinline__ void unrotate_lanes(const GroupLanes& gl, float (&v)[E]) {
  butterflies_lanes<E>(gl, v);
  const float f = numerics::hadamard_inverse_factor(gl.lanes * E);
#pragma unroll
  for (int k = 0; k < E; ++k) v[k] = numerics::mul_rn(v[k], f);
  negate_flagged<E>(gl, v);
}

}  // namespace echo::cuda::device
