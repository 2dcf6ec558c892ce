// Quantizers: golden vectors from an independent implementation, and properties.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <fstream>
#include <sstream>
#include <limits>

#include "echo/dtype.h"
#include "echo/numerics/group_params.h"
#include "echo/quantizer.h"
#include "test_util.h"

using namespace echo;
using echo::test::activations;
using echo::test::bits_float;

namespace {

// |x - x^| <= s/2 holds in exact arithmetic (docs/numerics.md 2.2). Binary32 rounding of
// t = x * (1/s) + z and of s * (q - z) adds at most a few units of 2^-24 relative to |t| <= 2048 + L
// steps, i.e. below 2^-11 + 2^-12 steps; 2^-9 steps leaves a margin of four.
constexpr double kQuantErrorSlackSteps = 1.0 / 512.0;

const QuantizerKind kKinds[] = {QuantizerKind::kZeroAware, QuantizerKind::kNaive,
                                QuantizerKind::kSymmetric};

std::vector<std::uint8_t> codes_of(const QuantSpec& spec, const std::vector<float>& x,
                                   std::vector<GroupParams>* params) {
  std::vector<std::uint8_t> q(x.size());
  params->resize(spec.num_groups(x.size()));
  quantize(spec, x.data(), x.size(), q.data(), params->data());
  return q;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(quantizer)

BOOST_AUTO_TEST_CASE(golden_vectors_match_independent_implementation) {
  std::ifstream in(echo::test::data_path("tests/reference/golden/quantizer_golden.txt"));
  BOOST_TEST_REQUIRE(in.good());
  std::string header;
  int cases = 0;
  while (std::getline(in, header)) {
    std::istringstream h(header);
    std::string word, kind;
    int bits = 0;
    std::size_t count = 0;
    h >> word >> kind >> bits >> count;
    std::string line;
    std::getline(in, line);
    std::istringstream values_line(line);
    std::vector<float> x(count);
    for (float& v : x) {
      std::uint32_t b;
      values_line >> std::hex >> b;
      v = bits_float(b);
    }
    std::getline(in, line);
    std::istringstream params_line(line);
    unsigned scale = 0, zero = 0;
    params_line >> std::hex >> scale >> zero;
    std::getline(in, line);
    std::istringstream codes_line(line);
    QuantSpec spec;
    spec.bits = bits;
    spec.group = 1024;
    spec.kind = *parse_quantizer(kind);
    spec.overflow = OverflowGroups::kPoison;  // the golden file's map: 0x7E00 past the fp16 scale
    std::vector<GroupParams> params;
    const std::vector<std::uint8_t> q = codes_of(spec, x, &params);
    BOOST_TEST_CONTEXT("case " << cases << ": " << header) {
      BOOST_TEST(params[0].scale == scale);
      BOOST_TEST(params[0].zero_point == zero);
      for (std::size_t i = 0; i < count; ++i) {
        int expected;
        codes_line >> std::dec >> expected;
        BOOST_TEST_REQUIRE(static_cast<int>(q[i]) == expected, "element " << i);
      }
    }
    ++cases;
  }
  BOOST_TEST(cases > 100);
}

BOOST_AUTO_TEST_CASE(error_is_at_most_half_a_step) {
  const float scales[] = {1e-5f, 0.01f, 1.0f, 37.0f, 3000.0f};
  const float offsets[] = {0.0f, 0.3f, 2.0f, -50.0f, 1000.0f};
  std::uint32_t seed = 1;
  for (QuantizerKind kind : kKinds) {
    for (int bits = kMinBits; bits <= kMaxBits; ++bits) {
      for (int group : {16, 128, 1024}) {
        for (float scale : scales) {
          for (float offset : offsets) {
            const std::vector<float> x = activations(3 * group + 5, seed++, scale, offset * scale);
            for (OverflowGroups overflow : {OverflowGroups::kWide, OverflowGroups::kPoison}) {
              QuantSpec spec{bits, group, kind};
              spec.overflow = overflow;
              std::vector<GroupParams> params;
              const std::vector<std::uint8_t> q = codes_of(spec, x, &params);
              std::vector<float> y(x.size());
              dequantize(spec, q.data(), params.data(), x.size(), y.data());
              for (std::size_t i = 0; i < x.size(); ++i) {
                // The step: the fp16 scale, or a wide group's 2s (docs/numerics.md 2.4: x / 2 is
                // quantized with the bf16 scale s).
                const std::uint16_t field = params[i / group].scale;
                const double s = numerics::is_wide_scale_field(field)
                                     ? 2.0 * numerics::wide_scale_of_field(field)
                                     : half_bits_to_float(field);
                if (std::isnan(s)) {
                  // The inputs are finite: wide groups (the default) never poison. Under poison,
                  // only when the scale truly exceeds fp16. Every scale candidate is at most
                  // 2 max|x| / 3 (asymmetric, L >= 3) or max|x| (symmetric, 2 bits), so the
                  // group's max|x| must exceed 65504 / 2 for a NaN scale to be legitimate.
                  BOOST_TEST_REQUIRE((overflow == OverflowGroups::kPoison), "wide group of element " << i);
                  const std::size_t begin = i / group * group;
                  const std::size_t end = std::min(x.size(), begin + group);
                  float amax = 0.0f;
                  for (std::size_t e = begin; e < end; ++e) amax = std::max(amax, std::fabs(x[e]));
                  BOOST_TEST_REQUIRE(amax > 65504.0f / 2.0f, "group of element " << i);
                  continue;
                }
                const double err = std::fabs(static_cast<double>(y[i]) - x[i]);
                BOOST_TEST_REQUIRE(err <= s * (0.5 + kQuantErrorSlackSteps),
                                   quantizer_name(kind) << " bits " << bits << " group " << group
                                                        << " element " << i << " error " << err
                                                        << " scale " << s);
                BOOST_TEST_REQUIRE(q[i] <= spec.max_code());
              }
            }
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(zero_is_exact_in_groups_that_contain_it) {
  for (int bits = kMinBits; bits <= kMaxBits; ++bits) {
    for (std::uint32_t seed = 0; seed < 50; ++seed) {
      QuantSpec spec{bits, 64, QuantizerKind::kZeroAware};
      std::vector<float> x = activations(64, seed, 1.0f, 0.7f * (static_cast<float>(seed % 7) - 3.0f));
      x[seed % 64] = 0.0f;
      if (*std::min_element(x.begin(), x.end()) > 0.0f || *std::max_element(x.begin(), x.end()) < 0.0f) continue;
      std::vector<float> y(x.size());
      quantize_dequantize(spec, x.data(), x.size(), y.data());
      BOOST_TEST_REQUIRE(echo::test::float_bits(y[seed % 64]) == 0u, "bits " << bits << " seed " << seed);
      std::vector<GroupParams> params;
      codes_of(spec, x, &params);
      const float z = half_bits_to_float(params[0].zero_point);
      BOOST_TEST_REQUIRE(z == std::round(z));
    }
  }
}

BOOST_AUTO_TEST_CASE(naive_map_does_not_represent_zero) {
  // The motivating failure of the naive map: zero falls between two codes.
  QuantSpec spec{4, 16, QuantizerKind::kNaive};
  std::vector<float> x = {-0.13f, 0.0f, 0.0f, 0.0f, 1.0f, 0.5f, 0.25f, 0.0f,
                          0.0f,   0.9f, 0.1f, 0.0f, 0.0f, 0.3f, 0.0f,  0.2f};
  std::vector<float> y(x.size());
  quantize_dequantize(spec, x.data(), x.size(), y.data());
  BOOST_TEST(y[1] != 0.0f);
  spec.kind = QuantizerKind::kZeroAware;
  quantize_dequantize(spec, x.data(), x.size(), y.data());
  BOOST_TEST(y[1] == 0.0f);
}

BOOST_AUTO_TEST_CASE(symmetric_never_uses_code_zero) {
  for (int bits = kMinBits; bits <= kMaxBits; ++bits) {
    QuantSpec spec{bits, 128, QuantizerKind::kSymmetric};
    const std::vector<float> x = activations(128 * 20, 77u + bits, 2.0f);
    std::vector<GroupParams> params;
    const std::vector<std::uint8_t> q = codes_of(spec, x, &params);
    for (std::uint8_t c : q) BOOST_TEST_REQUIRE(c != 0);
    for (const GroupParams& p : params) BOOST_TEST_REQUIRE(half_bits_to_float(p.zero_point) == std::ldexp(1.0f, bits - 1));
  }
}

BOOST_AUTO_TEST_CASE(blend_is_continuous_across_its_boundaries) {
  // A positive group [m, m + 1]: d = 15 m for 4 bits. Sweep m across d = 1 and d = 2 and check
  // that the lower grid level s * (0 - z) moves by no more than the step of the sweep allows.
  QuantSpec spec{4, 16, QuantizerKind::kZeroAware};
  double previous_low = 0.0;
  bool first = true;
  for (int i = 0; i <= 4000; ++i) {
    const float m = static_cast<float>(i) * (3.0f / 15.0f / 4000.0f);  // d from 0 to 3
    const GroupParams p = choose_group_params(spec, m, m + 1.0f);
    const double low = -static_cast<double>(half_bits_to_float(p.scale)) * half_bits_to_float(p.zero_point);
    if (!first) {
      // Sweep step in m is 5e-5; fp16 rounding of the zero-point moves the level by <= s/2.
      BOOST_TEST_REQUIRE(std::fabs(low - previous_low) <= 5e-5 + 0.5 * half_bits_to_float(p.scale) + 1e-6,
                         "m = " << m);
    }
    previous_low = low;
    first = false;
  }
  // d <= 1 puts zero on the grid; d >= 2 anchors the grid at the minimum.
  const GroupParams near = choose_group_params(spec, 0.05f, 1.05f);
  BOOST_TEST(half_bits_to_float(near.zero_point) == 0.0f);
  const GroupParams far = choose_group_params(spec, 0.5f, 1.5f);
  BOOST_TEST(std::fabs(-half_bits_to_float(far.scale) * half_bits_to_float(far.zero_point) - 0.5) < 1e-3);
}

BOOST_AUTO_TEST_CASE(non_finite_values_poison_only_their_group) {
  for (QuantizerKind kind : kKinds) {
    QuantSpec spec{4, 32, kind};
    std::vector<float> x = activations(32 * 4, 5u);
    x[40] = std::numeric_limits<float>::quiet_NaN();
    x[100] = -std::numeric_limits<float>::infinity();
    std::vector<float> y(x.size());
    const std::size_t poisoned = quantize_dequantize(spec, x.data(), x.size(), y.data());
    BOOST_TEST(poisoned == 2u);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const bool bad_group = (i / 32 == 1) || (i / 32 == 3);
      BOOST_TEST_REQUIRE(std::isnan(y[i]) == bad_group, "element " << i);
    }
  }
}

BOOST_AUTO_TEST_CASE(scale_beyond_half_range_poisons_the_group) {
  QuantSpec spec{4, 16, QuantizerKind::kZeroAware};
  spec.overflow = OverflowGroups::kPoison;  // the default (kWide) keeps it finite: test_transport_options
  std::vector<float> x(16, 0.0f);
  x[3] = 3.0e6f;  // range / 15 > 65504
  std::vector<float> y(16);
  BOOST_TEST(quantize_dequantize(spec, x.data(), 16, y.data()) == 1u);
  BOOST_TEST(std::isnan(y[0]));
}

BOOST_AUTO_TEST_CASE(all_zero_and_constant_groups) {
  for (QuantizerKind kind : kKinds) {
    QuantSpec spec{4, 16, kind};
    std::vector<float> zeros(16, 0.0f), y(16);
    BOOST_TEST(quantize_dequantize(spec, zeros.data(), 16, y.data()) == 0u);
    for (float v : y) BOOST_TEST_REQUIRE(echo::test::float_bits(v) == 0u);
    std::vector<float> constant(16, 7.25f);
    quantize_dequantize(spec, constant.data(), 16, y.data());
    // Asymmetric: the zero-point floor s >= |lo| / 2048 bounds the error by |lo| / 4096.
    // Symmetric: codes +-7 with the scale rounded up to fp16 (relative 2^-10) for 4 bits.
    const float tolerance = kind == QuantizerKind::kSymmetric ? 7.25f * 0x1p-9f : 7.25f / 4096.0f;
    for (float v : y) BOOST_TEST_REQUIRE(std::fabs(v - 7.25f) <= tolerance);
  }
}

BOOST_AUTO_TEST_CASE(partial_last_group_uses_its_own_range) {
  QuantSpec spec{4, 128, QuantizerKind::kZeroAware};
  std::vector<float> x = activations(128 + 3, 9u, 100.0f);
  x[128] = 0.001f;
  x[129] = 0.002f;
  x[130] = 0.003f;
  std::vector<GroupParams> params;
  codes_of(spec, x, &params);
  BOOST_TEST(params.size() == 2u);
  BOOST_TEST(half_bits_to_float(params[1].scale) < 0.001f);
}

BOOST_AUTO_TEST_CASE(spec_validation_names_the_problem) {
  QuantSpec bad_bits{9, 128, QuantizerKind::kZeroAware};
  BOOST_TEST(!bad_bits.validate().ok());
  BOOST_TEST(bad_bits.validate().message().find("bits") != std::string::npos);
  QuantSpec bad_group{4, 100, QuantizerKind::kZeroAware};
  BOOST_TEST(bad_group.validate().message().find("group") != std::string::npos);
  QuantSpec big_group{4, 2048, QuantizerKind::kZeroAware};
  BOOST_TEST(!big_group.validate().ok());
  QuantSpec good{8, 16, QuantizerKind::kSymmetric};
  BOOST_TEST(good.validate().ok());
}

BOOST_AUTO_TEST_SUITE_END()

// The map a kernel rebuilds from another lane's per-group fields (scale and zero-point bits,
// reciprocal) is the map make_fp16_group_map gives, field for field: poisoned, all-zero,
// one-signed, mixed-sign and past-fp16 ranges, every bit width and quantizer.
BOOST_AUTO_TEST_CASE(group_map_from_fields_rebuilds_the_fp16_map) {
  const float inf = std::numeric_limits<float>::infinity();
  const float ranges[][2] = {{0.0f, 0.0f},     {-1.0f, 2.0f},   {0.25f, 0.5f},    {-3e-3f, -1e-3f},
                             {1e-8f, 2e-8f},   {-7.0f, 0.0f},   {5.0f, 5.0f},     {-1e6f, 3e6f},
                             {-inf, 1.0f},     {0.0f, inf},     {std::nanf(""), 1.0f}, {-65504.0f, 1e-3f}};
  int checked = 0;
  for (const QuantizerKind kind : kKinds) {
    for (int bits = 2; bits <= 8; ++bits) {
      const numerics::QuantParams q{bits, kind};
      for (const auto& r : ranges) {
        const bool finite = std::isfinite(r[0]) && std::isfinite(r[1]);
        const numerics::GroupMap want = numerics::make_fp16_group_map(q, r[0], r[1], finite);
        const numerics::GroupMap got = numerics::group_map_from_fields(q, want.scale, want.zero_point, want.recip);
        BOOST_TEST_CONTEXT("bits " << bits << ", kind " << static_cast<int>(kind) << ", range [" << r[0] << ", "
                                   << r[1] << "]") {
          BOOST_TEST(got.poisoned == want.poisoned);
          BOOST_TEST(got.scale == want.scale);
          BOOST_TEST(got.zero_point == want.zero_point);
          if (!want.poisoned) {
            BOOST_TEST(numerics::float_to_bits(got.recip) == numerics::float_to_bits(want.recip));
            BOOST_TEST(numerics::float_to_bits(got.zero_add) == numerics::float_to_bits(want.zero_add));
            BOOST_TEST(numerics::float_to_bits(got.clip_lo) == numerics::float_to_bits(want.clip_lo));
            BOOST_TEST(numerics::float_to_bits(got.clip_hi) == numerics::float_to_bits(want.clip_hi));
            BOOST_TEST(numerics::float_to_bits(got.code_shift) == numerics::float_to_bits(want.code_shift));
          }
        }
        ++checked;
      }
    }
  }
  BOOST_TEST(checked == 3 * 7 * 12);
}

// With wide groups asked for, the fields of a wide map (flagged bf16 scale) rebuild the wide map,
// and the fields of every other map rebuild it unchanged; without, the flag is not looked at.
BOOST_AUTO_TEST_CASE(group_map_from_fields_rebuilds_the_wide_map) {
  const float ranges[][2] = {{-1.0f, 2.0f}, {-65504.0f * 15.0f, 1.0f}, {1e6f, 3e7f}, {-3e38f, 3e38f},
                             {-2e30f, -1e30f}, {0.0f, 1e37f}, {5e9f, 5e9f}};
  int wide_maps = 0;
  for (const QuantizerKind kind : kKinds) {
    for (int bits = 2; bits <= 8; ++bits) {
      const numerics::QuantParams q{bits, kind, false, true};
      for (const auto& r : ranges) {
        const numerics::GroupMap want = numerics::make_group_map(q, r[0], r[1], true);
        const numerics::GroupMap got = numerics::group_map_from_fields(q, want.scale, want.zero_point, want.recip);
        BOOST_TEST_CONTEXT("bits " << bits << ", kind " << static_cast<int>(kind) << ", range [" << r[0] << ", "
                                   << r[1] << "]") {
          BOOST_TEST(!want.poisoned);
          BOOST_TEST(got.poisoned == want.poisoned);
          BOOST_TEST(got.wide == want.wide);
          BOOST_TEST(got.scale == want.scale);
          BOOST_TEST(got.zero_point == want.zero_point);
          BOOST_TEST(numerics::float_to_bits(got.wide_scale) == numerics::float_to_bits(want.wide_scale));
          BOOST_TEST(numerics::float_to_bits(got.recip) == numerics::float_to_bits(want.recip));
          BOOST_TEST(numerics::float_to_bits(got.zero_add) == numerics::float_to_bits(want.zero_add));
          BOOST_TEST(numerics::float_to_bits(got.clip_lo) == numerics::float_to_bits(want.clip_lo));
          BOOST_TEST(numerics::float_to_bits(got.clip_hi) == numerics::float_to_bits(want.clip_hi));
          BOOST_TEST(numerics::float_to_bits(got.code_shift) == numerics::float_to_bits(want.code_shift));
          if (want.wide) {
            ++wide_maps;
            const numerics::QuantParams plain{bits, kind};
            BOOST_TEST(!numerics::group_map_from_fields(plain, want.scale, want.zero_point, want.recip).wide);
          }
        }
      }
    }
  }
  BOOST_TEST(wide_maps >= 3 * 7 * 4);
}
