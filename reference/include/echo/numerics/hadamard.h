// The randomized Hadamard rotation of one group (docs/numerics.md 2.6): a sign flip from a fixed
// seed, fp32 butterflies in a fixed order, and power-of-two normalisation split between the forward
// and inverse transforms so that no normalising multiply rounds (outside the subnormal range).
#pragma once

#include <cstdint>

#include "echo/numerics/host_device.h"

namespace echo::numerics {

// The documented seed of the sign vector; the same on every rank and for every group.
inline constexpr std::uint32_t kHadamardSeed = 0x2545F491u;

// Whether element e of a group is negated: bit 31 of murmur3's fmix32(e ^ kHadamardSeed).
ECHO_HOST_DEVICE bool hadamard_sign_negative(std::uint32_t e) {
  std::uint32_t h = e ^ kHadamardSeed;
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return (h >> 31) != 0;
}

ECHO_HOST_DEVICE int log2_of_power_of_two(int g) {
  int l = 0;
  while ((1 << l) < g) ++l;
  return l;
}

// The unnormalised Walsh-Hadamard butterflies in place: for h = 1, 2, 4, ..., g/2, for every block
// start i (a multiple of 2h) and j in [i, i + h): (x[j], x[j + h]) = (fp32(x[j] + x[j + h]),
// fp32(x[j] - x[j + h])).
// One butterfly on the pair (lower, upper) = (x[j], x[j + h]): the new lower value is
// fp32(lower + upper), the new upper one fp32(lower - upper). Kernels that hold the two elements in
// different threads call the halves.
ECHO_HOST_DEVICE float butterfly_lower(float lower, float upper) { return add_rn(lower, upper); }
ECHO_HOST_DEVICE float butterfly_upper(float lower, float upper) { return sub_rn(lower, upper); }

ECHO_HOST_DEVICE_INLINE void hadamard_butterflies(float* x, int g) {
  for (int h = 1; h < g; h *= 2) {
    for (int i = 0; i < g; i += 2 * h) {
      for (int j = i; j < i + h; ++j) {
        const float a = x[j];
        const float b = x[j + h];
        x[j] = butterfly_lower(a, b);
        x[j + h] = butterfly_upper(a, b);
      }
    }
  }
}

// The normalisations: forward 2^-ceil(log2(g) / 2), inverse 2^-floor(log2(g) / 2) (product 1 / g).
ECHO_HOST_DEVICE float hadamard_forward_factor(int g) { return pow2(-((log2_of_power_of_two(g) + 1) / 2)); }
ECHO_HOST_DEVICE float hadamard_inverse_factor(int g) { return pow2(-(log2_of_power_of_two(g) / 2)); }

// Forward: negate the flagged elements (exact), butterflies, multiply by 2^-ceil(log2(g) / 2).
ECHO_HOST_DEVICE_INLINE void rotate_group(float* x, int g) {
  for (int e = 0; e < g; ++e) {
    if (hadamard_sign_negative(static_cast<std::uint32_t>(e))) x[e] = -x[e];
  }
  hadamard_butterflies(x, g);
  const float f = hadamard_forward_factor(g);
  for (int e = 0; e < g; ++e) x[e] = mul_rn(x[e], f);
}

// Inverse: butterflies, multiply by 2^-floor(log2(g) / 2), negate the flagged elements. H H = g I,
// so inverse(forward(x)) = x in exact arithmetic.
ECHO_HOST_DEVICE_INLINE void unrotate_group(float* x, int g) {
  hadamard_butterflies(x, g);
  const float f = hadamard_inverse_factor(g);
  for (int e = 0; e < g; ++e) {
    const float v = mul_rn(x[e], f);
    x[e] = hadamard_sign_negative(static_cast<std::uint32_t>(e)) ? -v : v;
  }
}

}  // namespace echo::numerics
