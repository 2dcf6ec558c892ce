// Helpers shared by the test executables: deterministic data and raw-bit comparisons.
#pragma once

#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

namespace echo::test {

inline std::uint32_t float_bits(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

inline float bits_float(std::uint32_t b) {
  float v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

// Index of the first element whose bit pattern differs, or -1.
inline long first_bit_difference(const float* a, const float* b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (float_bits(a[i]) != float_bits(b[i])) return static_cast<long>(i);
  }
  return -1;
}

// Activation-like data: normal values with per-channel scales and an offset.
inline std::vector<float> activations(std::size_t n, std::uint32_t seed, float scale = 1.0f,
                                      float offset = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float channel = 1.0f + static_cast<float>((i * 2654435761u) % 97) / 24.0f;
    x[i] = normal(rng) * scale * channel + offset;
  }
  return x;
}

inline std::string data_path(const std::string& relative) {
  return std::string(ECHO_SOURCE_DIR) + "/" + relative;
}

}  // namespace echo::test

#include "echo/allreduce.h"
#include "echo/status.h"

namespace echo {
// Lets Boost.Test print these enums in failed assertions.
inline std::ostream& operator<<(std::ostream& os, StatusCode code) {
  return os << status_code_name(code);
}
inline std::ostream& operator<<(std::ostream& os, DType dtype) { return os << dtype_name(dtype); }
inline std::ostream& operator<<(std::ostream& os, Direction d) { return os << direction_name(d); }
}  // namespace echo
