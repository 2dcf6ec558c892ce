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
ECHO_HOST_DEVICE_INLINE void hadamard_butterflies(float* x, int g) {
  for (int h = 1; h < g; h *= 2) {
    for (int i = 0; i < g; i += 2 * h) {
      for (int j = i; j < i + h; ++j) {
        const float a = x[j];
        const float b = x[j + h];
        x[j] = add_rn(a, b);
        x[j + h] = sub_rn(a, b);
      }
    }
  }
}

// Forward: negate the flagged elements (exact), butterflies, multiply by 2^-ceil(log2(g) / 2).
ECHO_HOST_DEVICE_INLINE void rotate_group(float* x, int g) {
  for (int e = 0; e < g; ++e) {
    if (hadamard_sign_negative(static_cast<std::uint32_t>(e))) x[e] = -x[e];
  }
  hadamard_butterflies(x, g);
  const int l = log2_of_power_of_two(g);
  const float f = pow2(-((l + 1) / 2));
  for (int e = 0; e < g; ++e) x[e] = mul_rn(x[e], f);
}

// Inverse: butterflies, multiply by 2^-floor(log2(g) / 2), negate the flagged elements. H H = g I,
// so inverse(forward(x)) = x in exact arithmetic.
ECHO_HOST_DEVICE_INLINE void unrotate_group(float* x, int g) {
  hadamard_butterflies(x, g);
  const int l = log2_of_power_of_two(g);
  const float f = pow2(-(l / 2));
  for (int e = 0; e < g; ++e) {
    const float v = mul_rn(x[e], f);
    x[e] = hadamard_sign_negative(static_cast<std::uint32_t>(e)) ? -v : v;
  }
}

}  // namespace echo::numerics
