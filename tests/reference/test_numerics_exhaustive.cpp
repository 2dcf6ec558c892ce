// The portable conversions of echo/numerics/dtype_rounding.h against Eigen's half and bfloat16 (an
// independent implementation, the one the reference used before), over every input: all 2^32
// floats, all 2^16 half patterns. Together with tests/cuda/test_numerics_intrinsics.cpp (the device's
// conversion instructions against the same portable functions) this proves host and device round
// alike.
#include <boost/test/unit_test.hpp>

#include <Eigen/Core>

#include <cmath>
#include <cstdint>

#include "echo/numerics/dtype_rounding.h"

namespace echo::numerics {
namespace {

constexpr std::int64_t kAllFloats = std::int64_t{1} << 32;

std::uint16_t eigen_half_bits(float v) { return Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(v)); }
float eigen_half_value(std::uint16_t h) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(h));
}

BOOST_AUTO_TEST_CASE(half_round_to_nearest_even_matches_eigen_for_every_float) {
  std::int64_t mismatches = 0;
  std::int64_t first = -1;
#pragma omp parallel for schedule(static) reduction(+ : mismatches)
  for (std::int64_t i = 0; i < kAllFloats; ++i) {
    const float v = bits_to_float(static_cast<std::uint32_t>(i));
    const std::uint16_t want = std::isnan(v) ? kCanonicalNaNHalf : eigen_half_bits(v);
    if (float_to_half_bits(v) != want) {
      ++mismatches;
#pragma omp critical
      first = first < 0 ? i : first;
    }
  }
  BOOST_TEST(mismatches == 0, mismatches << " mismatches, e.g. input bits " << std::hex << first);
}

BOOST_AUTO_TEST_CASE(half_round_up_matches_round_to_nearest_then_next_up_for_every_float) {
  // The former definition: Eigen's round to nearest even, one step up when that fell below v.
  std::int64_t mismatches = 0;
#pragma omp parallel for schedule(static) reduction(+ : mismatches)
  for (std::int64_t i = 0; i < kAllFloats; ++i) {
    const float v = bits_to_float(static_cast<std::uint32_t>(i));
    std::uint16_t want = kCanonicalNaNHalf;
    if (!std::isnan(v)) {
      want = eigen_half_bits(v);
      if (eigen_half_value(want) < v) ++want;
    }
    mismatches += float_to_half_bits_round_up(v) != want ? 1 : 0;
  }
  BOOST_TEST(mismatches == 0);
}

BOOST_AUTO_TEST_CASE(half_to_float_matches_eigen_for_every_pattern) {
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const std::uint16_t b = static_cast<std::uint16_t>(h);
    BOOST_TEST_REQUIRE(float_to_bits(half_bits_to_float(b)) == float_to_bits(eigen_half_value(b)),
                       std::hex << h);
  }
}

BOOST_AUTO_TEST_CASE(bfloat16_round_to_nearest_even_matches_eigen_for_every_float) {
  std::int64_t mismatches = 0;
#pragma omp parallel for schedule(static) reduction(+ : mismatches)
  for (std::int64_t i = 0; i < kAllFloats; ++i) {
    const float v = bits_to_float(static_cast<std::uint32_t>(i));
    const std::uint16_t want =
        std::isnan(v) ? kCanonicalNaNBFloat16 : Eigen::numext::bit_cast<std::uint16_t>(Eigen::bfloat16(v));
    mismatches += float_to_bf16_bits(v) != want ? 1 : 0;
  }
  BOOST_TEST(mismatches == 0);
}

}  // namespace
}  // namespace echo::numerics
