// Inputs for the GPU bit-exact tests: seeded, representable in the dtype, and shaped to reach
// every branch of the quantizers (two-sided, one-sided near and far from zero, constant, all-zero
// and subnormal groups, large magnitudes). Never all zeros, so an unwritten output cannot pass.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "echo/dtype.h"

namespace echo::test {

inline std::vector<float> make_input(std::uint64_t seed, std::size_t count, DType dtype, int group) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> kind_of(0, 9);
  std::vector<float> x(count);
  for (std::size_t begin = 0; begin < count; begin += group) {
    const std::size_t end = std::min(count, begin + static_cast<std::size_t>(group));
    const int kind = kind_of(rng);
    const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 12) - 6);
    const float offset = normal(rng) * 4.0f;
    for (std::size_t i = begin; i < end; ++i) {
      float v;
      switch (kind) {
        case 0: v = 0.0f; break;                                        // all-zero group
        case 1: v = 3.0f + std::fabs(normal(rng)) * 0.01f; break;       // one-sided, far from 0
        case 2: v = std::fabs(normal(rng)) * scale + scale * 0.05f; break;  // one-sided, near 0
        case 3: v = -(std::fabs(normal(rng)) * scale + scale * 0.7f); break;  // negative, d in (1,2)
        case 4: v = 1.25f; break;                                       // constant
        case 5: v = normal(rng) * 1e-6f; break;                         // tiny (fp16 subnormal scale)
        case 6: v = normal(rng) * 3000.0f; break;                       // large
        case 7: v = (i % 7 == 0) ? 0.0f : normal(rng) * scale + offset; break;  // exact zeros inside
        default: v = normal(rng) * scale; break;
      }
      x[i] = round_to_dtype(v, dtype);
    }
  }
  return x;
}

// The range of a 4-bit group at the fp16 scale limit (65504 * 15, docs/numerics.md 2.1): a group
// spanning more takes the wide map under overflow-groups wide (2.4).
inline constexpr float kFp16ScaleLimitRange = 65504.0f * 15.0f;

// The largest magnitude make_wide_input scales a group to: eight ranks' sums stay below half the
// bf16 and fp32 range, so every input is finite and no sum overflows (a non-finite input or sum
// poisons its whole group, which would hide the finite-in, finite-out promise of docs/numerics.md
// 2.4 behind the poison rule).
inline constexpr float kWideInputMagnitude = 1e37f;

// Inputs for overflow-groups wide (docs/numerics.md 2.4): make_input's groups scaled by 10^e for
// e cycling through 0..37, or less where the group's largest magnitude would pass
// kWideInputMagnitude (bf16, fp32; fp16 inputs stay in range and reach the limit only as sums of
// +-65504 groups on every rank), and on rank 0 groups at and just past the fp16 scale limit (top
// value the largest dtype value <= kFp16ScaleLimitRange or the next one up, a 1 and zeros; the
// other ranks send zeros there, so the owner's sum meets the same boundary).
inline std::vector<float> make_wide_input(std::uint64_t seed, std::size_t count, DType dtype, int group, int rank) {
  std::vector<float> x = make_input(seed, count, dtype, group);
  const std::size_t groups = (count + group - 1) / group;
  for (std::size_t gi = 0; gi < groups; ++gi) {
    const std::size_t begin = gi * group;
    const std::size_t end = std::min(count, begin + static_cast<std::size_t>(group));
    const int kind = static_cast<int>(gi % 5);
    if (kind <= 1 && dtype != DType::kFloat16) {
      // At the limit (kind 0) or one dtype step past it (kind 1).
      std::uint32_t b;
      std::memcpy(&b, &kFp16ScaleLimitRange, 4);
      if (dtype == DType::kBFloat16) b &= 0xFFFF0000u;  // the largest bf16 <= the limit
      if (kind == 1) b += dtype == DType::kBFloat16 ? 0x10000u : 1u;
      float top;
      std::memcpy(&top, &b, 4);
      for (std::size_t i = begin; i < end; ++i) x[i] = 0.0f;
      if (rank == 0) {
        x[begin] = top;
        if (begin + 1 < end) x[begin + 1] = 1.0f;
      }
    } else if (dtype == DType::kFloat16) {
      if (kind == 2) {
        for (std::size_t i = begin; i < end; ++i) x[i] = (i % 2 ? -65504.0f : 65504.0f);
      }
    } else {
      float top = 0.0f;
      for (std::size_t i = begin; i < end; ++i) top = std::max(top, std::fabs(x[i]));
      float f = std::pow(10.0f, static_cast<float>((gi / 5 * 3 + kind) % 38));
      if (top > 0.0f) f = std::min(f, kWideInputMagnitude / top);
      for (std::size_t i = begin; i < end; ++i) x[i] = round_to_dtype(x[i] * f, dtype);
    }
  }
  return x;
}

// Whether every NaN among the values is the canonical fp32 NaN (docs/numerics.md 1; bf16 and fp16
// outputs decode to it as well).
inline bool nans_are_canonical(const std::vector<float>& v) {
  for (float x : v) {
    std::uint32_t b;
    std::memcpy(&b, &x, sizeof b);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u && b != kCanonicalNaNFloat) return false;
  }
  return true;
}

}  // namespace echo::test
