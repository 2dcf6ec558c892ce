// The transport options of docs/numerics.md 2.4-2.6: wide groups at the fp16-scale boundary,
// outliers sent exactly, the Hadamard rotation, and their wire bytes.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "echo/allreduce.h"
#include "echo/numerics/group_params.h"
#include "echo/numerics/hadamard.h"
#include "echo/rotation.h"
#include "echo/wire.h"
#include "test_util.h"

using namespace echo;
using echo::test::activations;
using echo::test::bits_float;
using echo::test::float_bits;

namespace {

// The largest group range whose 4-bit scale is finite in fp16: 65504 * 15 (sf = 65504 exactly).
constexpr float kFp16ScaleLimitRange = 65504.0f * 15.0f;

// |x - x^| <= s/2 in exact arithmetic for the quantized elements; fp32 rounding of the few
// operations adds far less than 2^-9 steps (the same slack as tests/reference/test_quantizer.cpp).
constexpr double kQuantErrorSlackSteps = 1.0 / 512.0;

QuantSpec spec_with(int outliers, OverflowGroups overflow, Rotation rotation = Rotation::kNone,
                    int group = 128) {
  QuantSpec q;
  q.group = group;
  q.outliers = outliers;
  q.overflow = overflow;
  q.rotation = rotation;
  return q;
}

struct Quantized {
  std::vector<std::uint8_t> codes;
  std::vector<GroupParams> params;
  std::vector<OutlierEntry> outliers;
  std::vector<float> out;
  std::size_t poisoned = 0;
};

Quantized round_trip(const QuantSpec& spec, const std::vector<float>& x) {
  Quantized r;
  const std::size_t groups = spec.num_groups(x.size());
  r.codes.resize(x.size());
  r.params.resize(groups);
  r.outliers.resize(groups * static_cast<std::size_t>(spec.outliers));
  r.out.resize(x.size());
  r.poisoned = quantize(spec, x.data(), x.size(), r.codes.data(), r.params.data(), r.outliers.data());
  dequantize(spec, r.codes.data(), r.params.data(), x.size(), r.out.data(), r.outliers.data());
  return r;
}

// The step of a group as stored: fp16 scale, or twice the wide bf16 scale.
double step_of(const GroupParams& p) {
  if (numerics::is_wide_scale_field(p.scale)) return 2.0 * numerics::wide_scale_of_field(p.scale);
  return numerics::half_bits_to_float(p.scale);
}

Status run_allreduce(const AllReduceSpec& spec, const std::vector<std::vector<float>>& in,
                     std::vector<std::vector<float>>* out, AllReduceReport* report) {
  const int ranks = static_cast<int>(in.size());
  out->assign(in.size(), std::vector<float>(in[0].size()));
  std::vector<const float*> ip;
  std::vector<float*> op;
  for (int r = 0; r < ranks; ++r) {
    ip.push_back(in[r].data());
    op.push_back((*out)[r].data());
  }
  std::vector<CompensatorState> states(in.size());
  return allreduce(spec, ranks, in[0].size(), ip.data(), op.data(),
                   spec.compensator.mode == CompensatorMode::kOff ? nullptr : states.data(), nullptr,
                   report);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(wide_groups)

BOOST_AUTO_TEST_CASE(the_fp16_boundary_poisons_or_widens_exactly_past_the_limit) {
  const float below = kFp16ScaleLimitRange;
  const float above = std::nextafter(kFp16ScaleLimitRange, std::numeric_limits<float>::infinity());
  for (const float top : {below, above}) {
    std::vector<float> x(128, 0.0f);
    x[5] = top;
    x[9] = 1.0f;
    const Quantized poison = round_trip(spec_with(0, OverflowGroups::kPoison), x);
    const Quantized wide = round_trip(spec_with(0, OverflowGroups::kWide), x);
    if (top == below) {
      // At the limit both modes give the same fp16 scale 65504 and the same codes.
      BOOST_TEST(poison.params[0].scale == 0x7BFF);
      BOOST_TEST(poison.poisoned == 0u);
      BOOST_TEST(wide.params[0].scale == poison.params[0].scale);
      BOOST_TEST(wide.codes == poison.codes);
    } else {
      BOOST_TEST(poison.poisoned == 1u);
      BOOST_TEST(poison.params[0].scale == numerics::kCanonicalNaNHalf);
      BOOST_TEST(std::isnan(poison.out[0]));
      BOOST_TEST(wide.poisoned == 0u);
      BOOST_TEST(numerics::is_wide_scale_field(wide.params[0].scale));
      // The halved range's scale, rounded up to bf16: the smallest bf16 >= fp32(fp32(top/2) / 15).
      const float sf = (top * 0.5f) / 15.0f;
      const float s = numerics::wide_scale_of_field(wide.params[0].scale);
      BOOST_TEST(s >= sf);
      BOOST_TEST(numerics::round_to_bf16(s) == s);
      BOOST_TEST(bits_float(float_bits(s) - 0x10000u) < sf);
      for (std::size_t i = 0; i < x.size(); ++i) {
        BOOST_TEST_REQUIRE(std::isfinite(wide.out[i]));
        BOOST_TEST(std::fabs(wide.out[i] - x[i]) <= step_of(wide.params[0]) * (0.5 + kQuantErrorSlackSteps));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(groups_near_the_float_limit_stay_finite) {
  // hi - lo overflows fp32 here (the halving is what keeps the wide map finite).
  const float big = 3.0e38f;
  for (const QuantizerKind kind : {QuantizerKind::kZeroAware, QuantizerKind::kNaive, QuantizerKind::kSymmetric}) {
    QuantSpec spec = spec_with(0, OverflowGroups::kWide);
    spec.kind = kind;
    std::vector<float> x = activations(256, 7, 1.0e37f);
    x[3] = big;
    x[200] = -big;
    const Quantized q = round_trip(spec, x);
    BOOST_TEST(q.poisoned == 0u);
    for (std::size_t i = 0; i < x.size(); ++i) {
      BOOST_TEST_REQUIRE(std::isfinite(q.out[i]));
      BOOST_TEST(std::fabs(q.out[i] - x[i]) <= step_of(q.params[i / 128]) * (0.5 + kQuantErrorSlackSteps));
    }
  }
}

BOOST_AUTO_TEST_CASE(an_fp16_scale_field_never_has_the_wide_flag) {
  // Every fp16 scale the map can produce is >= 0 or the positive NaN: bit 15 is free.
  for (const float range : {0.0f, 1e-30f, 1e-3f, 1.0f, 1e4f, kFp16ScaleLimitRange}) {
    const numerics::GroupMap m = numerics::make_group_map({4, QuantizerKind::kZeroAware}, -range, range, true);
    BOOST_TEST(!numerics::is_wide_scale_field(m.scale));
  }
  BOOST_TEST(!numerics::is_wide_scale_field(numerics::kCanonicalNaNHalf));
}

BOOST_AUTO_TEST_CASE(finite_inputs_give_finite_outputs_unless_the_sum_overflows) {
  // Rank contributions of every magnitude from 1 to 1e37: poison mode NaNs the groups past the fp16
  // limit, the wide mode keeps every output finite and near the exact sum.
  const int ranks = 4;
  std::vector<std::vector<float>> in;
  for (int r = 0; r < ranks; ++r) {
    std::vector<float> x = activations(4096, 100 + r);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] *= std::pow(10.0f, static_cast<float>((i / 128) % 38));
    in.push_back(x);
  }
  AllReduceSpec spec;
  spec.dtype = DType::kFloat32;
  spec.quant = spec_with(0, OverflowGroups::kPoison);
  std::vector<std::vector<float>> out;
  AllReduceReport report;
  BOOST_TEST_REQUIRE(run_allreduce(spec, in, &out, &report).ok());
  BOOST_TEST(report.poisoned_groups > 0u);
  spec.quant.overflow = OverflowGroups::kWide;
  BOOST_TEST_REQUIRE(run_allreduce(spec, in, &out, &report).ok());
  BOOST_TEST(report.poisoned_groups == 0u);
  for (std::size_t i = 0; i < out[0].size(); ++i) {
    BOOST_TEST_REQUIRE(std::isfinite(out[0][i]));
    for (int r = 1; r < ranks; ++r) BOOST_TEST_REQUIRE(float_bits(out[r][i]) == float_bits(out[0][i]));
  }
  // A sum beyond FLT_MAX is the one way out of the finite range.
  for (auto& x : in) std::fill(x.begin(), x.end(), 1.0e38f);
  BOOST_TEST_REQUIRE(run_allreduce(spec, in, &out, &report).ok());
  BOOST_TEST(!std::isfinite(out[0][0]));
}

BOOST_AUTO_TEST_CASE(the_doubled_scale_decodes_every_wide_value) {
  // The kernels decode a wide group as fp32(2s * d) (numerics::wide_decode_scale); the spec says
  // fp32(fp32(s * d) * 2). Every bf16 scale a wide map can have (above 2^14, at most 2^126 from 3
  // bits up), every code at 4 bits and the ends of 8, zero-points of both signs up to 2048 in
  // magnitude (fp16 subnormals among them) and the symmetric ones: the same bits, overflow to
  // +-Inf included.
  const std::uint16_t first = 0x4680;  // bf16 2^14
  const std::uint16_t last = 0x7E80;   // bf16 2^126
  std::vector<float> codes;
  for (int q = 0; q < 16; ++q) codes.push_back(static_cast<float>(q));
  for (const int q : {127, 128, 129, 254, 255}) codes.push_back(static_cast<float>(q));
  std::vector<float> zeros;
  for (std::uint32_t h = 0; h <= 0x6800u; h += 241u) {  // fp16 0 .. 2048
    const float z = numerics::half_bits_to_float(static_cast<std::uint16_t>(h));
    zeros.push_back(z);
    zeros.push_back(-z);
  }
  zeros.push_back(8.0f);
  zeros.push_back(128.0f);
  long checked = 0;
  long mismatched = 0;
  long overflowed = 0;
  for (std::uint32_t b = first; b <= last; ++b) {
    const float s = numerics::bf16_bits_to_float(static_cast<std::uint16_t>(b));
    const float doubled = numerics::wide_decode_scale(s);
    BOOST_TEST_REQUIRE(std::isfinite(doubled));
    for (const float z : zeros) {
      for (const float q : codes) {
        const float want = numerics::dequantize_wide_value(s, z, q);
        const float got = numerics::mul_rn(doubled, numerics::sub_rn(q, z));
        mismatched += float_bits(got) != float_bits(want);
        overflowed += std::isinf(want);
        ++checked;
      }
    }
  }
  BOOST_TEST(mismatched == 0);
  BOOST_TEST(overflowed > 0);  // the overflow edge was reached
  BOOST_TEST_MESSAGE(checked << " wide values decoded both ways");
}

BOOST_AUTO_TEST_CASE(wide_mode_changes_nothing_below_the_limit) {
  const int ranks = 3;
  std::vector<std::vector<float>> in;
  for (int r = 0; r < ranks; ++r) in.push_back(activations(1000, 40 + r, 3.0f));
  AllReduceSpec spec;
  spec.compensator.mode = CompensatorMode::kDual;
  std::vector<std::vector<float>> poison, wide;
  AllReduceReport report;
  BOOST_TEST_REQUIRE(run_allreduce(spec, in, &poison, &report).ok());
  spec.quant.overflow = OverflowGroups::kWide;
  BOOST_TEST_REQUIRE(run_allreduce(spec, in, &wide, &report).ok());
  BOOST_TEST(echo::test::first_bit_difference(poison[0].data(), wide[0].data(), poison[0].size()) == -1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(outliers)

BOOST_AUTO_TEST_CASE(the_largest_values_are_reproduced_as_bf16_and_the_rest_on_its_own_range) {
  for (const int k : {1, 2}) {
    std::vector<float> x = activations(128, 3);
    x[17] = 1000.25f;   // bf16 1000
    x[90] = -640.0f;    // exact in bf16
    const Quantized q = round_trip(spec_with(k, OverflowGroups::kPoison), x);
    BOOST_TEST(q.outliers[0].index == 17);
    BOOST_TEST(q.out[17] == 1000.0f);  // the bf16 rounding of the value, to nearest even
    if (k == 2) {
      BOOST_TEST(q.outliers[1].index == 90);
      BOOST_TEST(q.out[90] == -640.0f);
    }
    // The others: quantized on the range without the outliers.
    float mn = std::numeric_limits<float>::infinity(), mx = -mn;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (i == 17 || (k == 2 && i == 90)) continue;
      mn = std::min(mn, x[i]);
      mx = std::max(mx, x[i]);
    }
    const GroupParams expected = choose_group_params(spec_with(0, OverflowGroups::kPoison), mn, mx);
    BOOST_TEST(q.params[0].scale == expected.scale);
    BOOST_TEST(q.params[0].zero_point == expected.zero_point);
  }
}

BOOST_AUTO_TEST_CASE(equal_magnitudes_pick_the_lowest_index) {
  std::vector<float> x(128, 0.5f);
  x[40] = -5.0f;
  x[7] = 5.0f;
  x[99] = 5.0f;
  Quantized q = round_trip(spec_with(1, OverflowGroups::kPoison), x);
  BOOST_TEST(q.outliers[0].index == 7);
  q = round_trip(spec_with(2, OverflowGroups::kPoison), x);
  BOOST_TEST(q.outliers[0].index == 7);
  BOOST_TEST(q.outliers[1].index == 40);
}

BOOST_AUTO_TEST_CASE(a_group_shorter_than_k_sends_every_value_exactly) {
  const std::vector<float> x = {3.0f};
  const Quantized q = round_trip(spec_with(2, OverflowGroups::kPoison), x);
  BOOST_TEST(q.out[0] == 3.0f);
  BOOST_TEST(q.outliers[0].index == 0);
  BOOST_TEST(q.outliers[1].index == 0xFFFF);
}

BOOST_AUTO_TEST_CASE(a_poisoned_group_stays_nan_at_its_outliers) {
  std::vector<float> x(128, 1.0f);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[4] = 100.0f;
  const Quantized q = round_trip(spec_with(1, OverflowGroups::kPoison), x);
  BOOST_TEST(q.poisoned == 1u);
  BOOST_TEST(std::isnan(q.out[4]));
}

BOOST_AUTO_TEST_CASE(wire_bytes_count_the_outlier_entries) {
  // 128 x 4-bit codes (64 bytes) + scale and zero-point (4) + 4 bytes per outlier.
  BOOST_TEST(wire_bytes(spec_with(0, OverflowGroups::kPoison), 128) == 68u);
  BOOST_TEST(wire_bytes(spec_with(1, OverflowGroups::kPoison), 128) == 72u);
  BOOST_TEST(wire_bytes(spec_with(2, OverflowGroups::kPoison), 300) == 3u * 76u);
  BOOST_TEST(spec_with(1, OverflowGroups::kPoison).wire_bits_per_element() == 4.5);
  BOOST_TEST(spec_with(1, OverflowGroups::kPoison, Rotation::kNone, 256).wire_bits_per_element() == 4.25);
  BOOST_TEST(spec_with(2, OverflowGroups::kPoison, Rotation::kNone, 256).wire_bits_per_element() == 4.375);
}

BOOST_AUTO_TEST_CASE(the_wire_round_trip_keeps_the_outlier_entries) {
  const QuantSpec spec = spec_with(2, OverflowGroups::kWide);
  std::vector<float> x = activations(300, 11);
  x[5] = 4194304.0f;  // an outlier: the rest of its group keeps an fp16 scale
  x[260] = -77.0f;
  const Quantized q = round_trip(spec, x);
  std::vector<std::uint8_t> wire(wire_bytes(spec, x.size()));
  pack_segment(spec, q.codes.data(), q.params.data(), x.size(), wire.data(), q.outliers.data());
  Quantized back = q;
  std::fill(back.codes.begin(), back.codes.end(), 0);
  std::fill(back.outliers.begin(), back.outliers.end(), OutlierEntry{});
  unpack_segment(spec, wire.data(), x.size(), back.codes.data(), back.params.data(), back.outliers.data());
  dequantize(spec, back.codes.data(), back.params.data(), x.size(), back.out.data(), back.outliers.data());
  BOOST_TEST(echo::test::first_bit_difference(q.out.data(), back.out.data(), x.size()) == -1);
  BOOST_TEST(back.outliers[0].index == 5);
  BOOST_TEST(back.out[5] == 4194304.0f);
  BOOST_TEST(!numerics::is_wide_scale_field(back.params[0].scale));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(rotation)

BOOST_AUTO_TEST_CASE(the_sign_vector_is_the_documented_hash) {
  // Bit 31 of murmur3's fmix32(e ^ 0x2545F491) for e = 0..31, computed independently.
  const char* expected = "10111001101011000101101000110000";
  for (int e = 0; e < 32; ++e) {
    BOOST_TEST(numerics::hadamard_sign_negative(static_cast<std::uint32_t>(e)) == (expected[e] == '1'));
  }
}

BOOST_AUTO_TEST_CASE(a_unit_vector_rotates_to_a_flat_power_of_two) {
  for (const int g : {16, 32, 128, 1024}) {
    std::vector<float> x(static_cast<std::size_t>(g), 0.0f);
    x[0] = 1.0f;
    numerics::rotate_group(x.data(), g);
    const int l = numerics::log2_of_power_of_two(g);
    const float level = std::ldexp(1.0f, -((l + 1) / 2));
    const float sign = numerics::hadamard_sign_negative(0) ? -1.0f : 1.0f;
    for (float v : x) BOOST_TEST_REQUIRE(v == sign * level);
  }
}

BOOST_AUTO_TEST_CASE(small_integers_round_trip_exactly) {
  // Every butterfly sum of integers below 2^24 / g is exact, and the scalings are powers of two:
  // the same values, except that a zero at a negated position comes back as -0.
  for (const int g : {16, 64, 128, 256, 1024}) {
    std::vector<float> x(static_cast<std::size_t>(g));
    for (int i = 0; i < g; ++i) x[static_cast<std::size_t>(i)] = static_cast<float>((i * 37) % 201 - 100);
    std::vector<float> y = x;
    numerics::rotate_group(y.data(), g);
    numerics::unrotate_group(y.data(), g);
    for (int i = 0; i < g; ++i) {
      const std::size_t e = static_cast<std::size_t>(i);
      BOOST_TEST_REQUIRE(y[e] == x[e]);
      if (x[e] != 0.0f) BOOST_TEST_REQUIRE(float_bits(y[e]) == float_bits(x[e]));
    }
  }
}

BOOST_AUTO_TEST_CASE(the_round_trip_error_is_a_few_units_of_rounding) {
  // Each of the 2 log2(g) butterfly stages rounds once, relative error 2^-24 of values at most
  // g * max|x|: the round trip stays within 2 log2(g) * g * 2^-24 * max|x|.
  const int g = 128;
  const std::vector<float> x = activations(static_cast<std::size_t>(g) * 8, 5, 10.0f);
  std::vector<float> y = x;
  QuantSpec spec = spec_with(0, OverflowGroups::kPoison, Rotation::kHadamard);
  rotate_groups(spec, y.data(), y.size());
  unrotate_groups(spec, y.data(), y.size());
  double max_abs = 0.0, max_err = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(x[i])));
    max_err = std::max(max_err, std::fabs(static_cast<double>(y[i]) - x[i]));
  }
  const double bound = 2.0 * 7 * g * std::ldexp(1.0, -24) * max_abs;
  BOOST_TEST(max_err <= bound);
  BOOST_TEST(max_err > 0.0);  // not the identity by accident
}

BOOST_AUTO_TEST_CASE(a_partial_last_group_is_left_alone) {
  QuantSpec spec = spec_with(0, OverflowGroups::kPoison, Rotation::kHadamard, 16);
  std::vector<float> x = activations(40, 9);
  std::vector<float> y = x;
  rotate_groups(spec, y.data(), y.size());
  BOOST_TEST(echo::test::first_bit_difference(x.data() + 32, y.data() + 32, 8) == -1);
  BOOST_TEST(echo::test::first_bit_difference(x.data(), y.data(), 32) != -1);
}

BOOST_AUTO_TEST_CASE(rotation_spreads_a_spike_and_keeps_ranks_identical) {
  // One large value per group: without rotation it sets the step of its group; rotated, the
  // error of the all-reduce drops.
  const int ranks = 4;
  std::vector<std::vector<float>> in;
  for (int r = 0; r < ranks; ++r) {
    std::vector<float> x = activations(2048, 60 + r);
    for (std::size_t i = 5; i < x.size(); i += 128) x[i] = 200.0f;
    in.push_back(x);
  }
  std::vector<float> exact(in[0].size());
  std::vector<const float*> ip;
  for (auto& x : in) ip.push_back(x.data());
  exact_allreduce(DType::kFloat32, ranks, exact.size(), ip.data(), exact.data());
  double err[2];
  for (const bool rotate : {false, true}) {
    AllReduceSpec spec;
    spec.dtype = DType::kFloat32;
    spec.quant.rotation = rotate ? Rotation::kHadamard : Rotation::kNone;
    std::vector<std::vector<float>> out;
    AllReduceReport report;
    BOOST_TEST_REQUIRE(run_allreduce(spec, in, &out, &report).ok());
    double e = 0.0;
    for (std::size_t i = 0; i < exact.size(); ++i) {
      e += (out[0][i] - exact[i]) * (out[0][i] - exact[i]);
      for (int r = 1; r < ranks; ++r) BOOST_TEST_REQUIRE(float_bits(out[r][i]) == float_bits(out[0][i]));
    }
    err[rotate ? 1 : 0] = e;
  }
  BOOST_TEST(err[1] < 0.5 * err[0]);
}

BOOST_AUTO_TEST_CASE(the_local_residual_sums_to_minus_the_error_with_rotation) {
  // sum_i u_i = -delta in exact arithmetic: the residuals are in unrotated units. Checked with
  // eta = 1 through the state after one call: m1 = (1 - beta1) u, so sum_i m1_i ~ -(1-beta1) delta.
  const int ranks = 4;
  const std::size_t n = 1024;
  std::vector<std::vector<float>> in;
  for (int r = 0; r < ranks; ++r) in.push_back(activations(n, 80 + r));
  AllReduceSpec spec;
  spec.dtype = DType::kFloat32;
  spec.quant.rotation = Rotation::kHadamard;
  spec.compensator.mode = CompensatorMode::kSingle;
  spec.compensator.residual = ResidualMode::kLocal;
  spec.compensator.eta = 1.0f;
  spec.compensator.beta = 0.0f;  // m1 = u exactly
  std::vector<std::vector<float>> out(ranks, std::vector<float>(n));
  std::vector<const float*> ip;
  std::vector<float*> op;
  for (int r = 0; r < ranks; ++r) {
    ip.push_back(in[r].data());
    op.push_back(out[r].data());
  }
  std::vector<CompensatorState> states(ranks);
  BOOST_TEST_REQUIRE(allreduce(spec, ranks, n, ip.data(), op.data(), states.data(), nullptr, nullptr).ok());
  double worst = 0.0, scale = 0.0;
  for (std::size_t e = 0; e < n; ++e) {
    double sum_u = 0.0, sum_x = 0.0;
    for (int r = 0; r < ranks; ++r) {
      sum_u += states[r].m1[e];
      sum_x += in[r][e];
    }
    const double delta = out[0][e] - sum_x;
    worst = std::max(worst, std::fabs(sum_u + delta));
    scale = std::max(scale, std::fabs(delta));
  }
  BOOST_TEST(scale > 0.0);
  BOOST_TEST(worst <= 1e-3 * scale);  // fp32 rounding of the butterflies and sums only
}

BOOST_AUTO_TEST_SUITE_END()
