// Exact conversions between float and the 16-bit element types.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>

#include "echo/dtype.h"
#include "test_util.h"

using namespace echo;
using echo::test::bits_float;
using echo::test::float_bits;

BOOST_AUTO_TEST_SUITE(dtype)

BOOST_AUTO_TEST_CASE(half_known_bit_patterns) {
  BOOST_TEST(float_to_half_bits(1.0f) == 0x3C00);
  BOOST_TEST(float_to_half_bits(-2.0f) == 0xC000);
  BOOST_TEST(float_to_half_bits(65504.0f) == 0x7BFF);
  BOOST_TEST(float_to_half_bits(65520.0f) == 0x7C00);  // halfway to 65536 rounds to even: Inf
  BOOST_TEST(float_to_half_bits(std::ldexp(1.0f, -24)) == 0x0001);  // smallest subnormal
  BOOST_TEST(float_to_half_bits(std::ldexp(1.0f, -25)) == 0x0000);  // tie to even: 0
  BOOST_TEST(float_to_half_bits(std::ldexp(3.0f, -26)) == 0x0001);  // above the tie: up
  BOOST_TEST((float_to_half_bits(std::nanf("")) & 0x7C00) == 0x7C00);
  BOOST_TEST((float_to_half_bits(std::nanf("")) & 0x03FF) != 0);
}

BOOST_AUTO_TEST_CASE(every_nan_becomes_the_canonical_one) {
  // Both signs, quiet and signalling, with and without payload: one NaN per type (numerics.md 1).
  for (std::uint32_t b : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF8005A5u, 0x7FFFFFFFu, 0xFFFFFFFFu}) {
    const float v = bits_float(b);
    BOOST_TEST_REQUIRE(float_to_half_bits(v) == kCanonicalNaNHalf, std::hex << b);
    BOOST_TEST_REQUIRE(float_to_bfloat16_bits(v) == kCanonicalNaNBFloat16, std::hex << b);
    BOOST_TEST_REQUIRE(float_to_half_bits_round_up(v) == kCanonicalNaNHalf, std::hex << b);
    for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
      BOOST_TEST_REQUIRE(float_bits(round_to_dtype(v, t)) == kCanonicalNaNFloat, std::hex << b);
      float a[3] = {1.5f, v, -0.0f};
      round_to_dtype(a, 3, t);
      BOOST_TEST_REQUIRE(float_bits(a[1]) == kCanonicalNaNFloat, std::hex << b);
      BOOST_TEST_REQUIRE(float_bits(a[2]) == 0x80000000u);  // -0 is no NaN: kept
    }
    BOOST_TEST_REQUIRE(float_bits(canonical_nan(v)) == kCanonicalNaNFloat);
  }
  BOOST_TEST(float_bits(canonical_nan(-0.0f)) == 0x80000000u);
  BOOST_TEST(float_bits(half_bits_to_float(kCanonicalNaNHalf)) == kCanonicalNaNFloat);
  BOOST_TEST(float_bits(bfloat16_bits_to_float(kCanonicalNaNBFloat16)) == kCanonicalNaNFloat);
}

BOOST_AUTO_TEST_CASE(half_ties_round_to_even) {
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: even mantissa (1) wins.
  BOOST_TEST(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);
  // 1 + 3 * 2^-11 lies halfway between 1 + 2^-10 and 1 + 2^-9: even (1 + 2^-9) wins.
  BOOST_TEST(float_to_half_bits(1.0f + 3.0f * std::ldexp(1.0f, -11)) == 0x3C02);
}

BOOST_AUTO_TEST_CASE(half_round_trip_is_exact_for_every_pattern) {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const std::uint16_t h = static_cast<std::uint16_t>(b);
    const float v = half_bits_to_float(h);
    if (std::isnan(v)) continue;
    BOOST_TEST_REQUIRE(float_to_half_bits(v) == h);
  }
}

BOOST_AUTO_TEST_CASE(bfloat16_rounds_to_nearest_even) {
  BOOST_TEST(float_to_bfloat16_bits(1.0f) == 0x3F80);
  BOOST_TEST(float_to_bfloat16_bits(bits_float(0x3F808000u)) == 0x3F80);  // tie, even stays
  BOOST_TEST(float_to_bfloat16_bits(bits_float(0x3F818000u)) == 0x3F82);  // tie, odd rounds up
  BOOST_TEST(float_to_bfloat16_bits(bits_float(0x3F808001u)) == 0x3F81);  // above tie
  BOOST_TEST(float_to_bfloat16_bits(bits_float(0x7F7FFFFFu)) == 0x7F80);  // FLT_MAX -> Inf
  BOOST_TEST(std::isnan(round_to_dtype(std::nanf(""), DType::kBFloat16)));
  for (std::uint32_t b = 0; b < 0x10000; b += 7) {
    const float v = bfloat16_bits_to_float(static_cast<std::uint16_t>(b));
    if (std::isnan(v)) continue;
    BOOST_TEST_REQUIRE(float_to_bfloat16_bits(v) == b);
  }
}

BOOST_AUTO_TEST_CASE(round_up_is_the_smallest_half_not_below) {
  for (std::uint16_t h = 0; h < 0x7C00; ++h) {
    const float v = half_bits_to_float(h);
    BOOST_TEST_REQUIRE(float_to_half_bits_round_up(v) == h);
    const float above = std::nextafter(v, std::numeric_limits<float>::infinity());
    BOOST_TEST_REQUIRE(float_to_half_bits_round_up(above) == static_cast<std::uint16_t>(h + 1));
  }
  BOOST_TEST(float_to_half_bits_round_up(1e9f) == 0x7C00);
}

BOOST_AUTO_TEST_CASE(names_parse_back) {
  for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    BOOST_TEST(static_cast<int>(*parse_dtype(dtype_name(t))) == static_cast<int>(t));
  }
  BOOST_TEST(!parse_dtype("int8").has_value());
  BOOST_TEST(float_bits(round_to_dtype(0.1f, DType::kFloat32)) == float_bits(0.1f));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(dtype_arrays)

BOOST_AUTO_TEST_CASE(array_rounding_matches_scalar_rounding) {
  // The vectorized bfloat16 path must agree with the scalar conversion on every kind of value:
  // ties, carries into the exponent, overflow to Inf, subnormals, NaN payloads.
  std::vector<float> values;
  for (std::uint32_t hi = 0; hi < 0x10000; hi += 3) {
    for (std::uint32_t lo : {0x0000u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) {
      values.push_back(bits_float((hi << 16) | lo));
    }
  }
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    std::vector<float> array = values;
    round_to_dtype(array.data(), array.size(), dtype);
    for (std::size_t i = 0; i < values.size(); ++i) {
      // Bit for bit, NaNs included: both give the canonical NaN (0x7FC0 for bfloat16).
      const float scalar = round_to_dtype(values[i], dtype);
      BOOST_TEST_REQUIRE(float_bits(array[i]) == float_bits(scalar), "value bits " << std::hex << float_bits(values[i]));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
