// Compensator: Algorithm 1's recurrence against its closed form (Eq. 12) and the apply step.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "echo/allreduce.h"
#include "echo/compensator.h"
#include "test_util.h"

using namespace echo;

BOOST_AUTO_TEST_SUITE(compensator)

BOOST_AUTO_TEST_CASE(apply_with_empty_state_is_identity) {
  CompensatorSpec spec;
  CompensatorState state;
  const std::vector<float> x = echo::test::activations(100, 1u);
  std::vector<float> out(100);
  compensator_apply(spec, state, x.data(), x.size(), out.data());
  BOOST_TEST(echo::test::first_bit_difference(x.data(), out.data(), 100) == -1);
}

BOOST_AUTO_TEST_CASE(dual_apply_follows_documented_order) {
  CompensatorSpec spec;
  CompensatorState state;
  state.m1 = {1.0f, -0.3f, 1e-3f};
  state.m2 = {2.0f, 0.7f, -5e-4f};
  const std::vector<float> x = {0.1f, 0.2f, 0.3f};
  std::vector<float> out(3);
  compensator_apply(spec, state, x.data(), 3, out.data());
  for (int i = 0; i < 3; ++i) {
    volatile float slow = spec.a * state.m1[i];
    volatile float fast = (1.0f - spec.a) * state.m2[i];
    volatile float blend = slow + fast;
    volatile float c = spec.eta * blend;
    volatile float expected = x[i] + c;
    BOOST_TEST(echo::test::float_bits(out[i]) == echo::test::float_bits(expected));
  }
}

BOOST_AUTO_TEST_CASE(update_with_zero_decay_stores_the_residual) {
  CompensatorSpec spec;
  spec.mode = CompensatorMode::kSingle;
  spec.beta = 0.0f;
  CompensatorState state;
  const std::vector<float> u = echo::test::activations(50, 2u);
  compensator_update(spec, state, u.data(), u.size());
  BOOST_TEST(echo::test::first_bit_difference(state.m1.data(), u.data(), 50) == -1);
}

BOOST_AUTO_TEST_CASE(recurrence_matches_closed_form_of_eq12) {
  // Feed the all-reduce a sequence of sites and compare the aggregate correction
  // C_k = sum_i (x'_ki - x_ki) with -eta * sum_{s<k} w_{k-1-s} delta_s (Eq. 12), delta_s = y_s - sum_i x'_si.
  for (ResidualMode residual : {ResidualMode::kGlobal, ResidualMode::kLocal}) {
    AllReduceSpec spec;
    spec.dtype = DType::kFloat32;
    spec.compensator.residual = residual;
    const int ranks = 3;
    const std::size_t n = 300;
    const int sites = 12;
    std::vector<CompensatorState> states(ranks);
    std::vector<std::vector<double>> deltas;
    const double eta = spec.compensator.eta, a = spec.compensator.a;
    const double b1 = spec.compensator.beta1, b2 = spec.compensator.beta2;
    double worst = 0.0, scale = 0.0;
    for (int k = 0; k < sites; ++k) {
      std::vector<std::vector<float>> x(ranks), xp(ranks, std::vector<float>(n)), y(ranks, std::vector<float>(n));
      std::vector<const float*> in(ranks);
      std::vector<float*> out(ranks), comp(ranks);
      for (int r = 0; r < ranks; ++r) {
        x[r] = echo::test::activations(n, 100u * k + r, 1.0f, 0.2f);
        in[r] = x[r].data();
        out[r] = y[r].data();
        comp[r] = xp[r].data();
      }
      BOOST_TEST_REQUIRE(allreduce(spec, ranks, n, in.data(), out.data(), states.data(), comp.data(), nullptr).ok());
      std::vector<double> delta(n);
      for (std::size_t e = 0; e < n; ++e) {
        double c = 0.0, sxp = 0.0;
        for (int r = 0; r < ranks; ++r) {
          c += static_cast<double>(xp[r][e]) - x[r][e];
          sxp += xp[r][e];
        }
        double predicted = 0.0;
        for (int s = 0; s < k; ++s) {
          const int age = k - 1 - s;
          const double w = a * (1 - b1) * std::pow(b1, age) + (1 - a) * (1 - b2) * std::pow(b2, age);
          predicted -= eta * w * deltas[s][e];
        }
        worst = std::max(worst, std::fabs(c - predicted));
        scale = std::max(scale, std::fabs(predicted));
        delta[e] = static_cast<double>(y[0][e]) - sxp;
      }
      deltas.push_back(delta);
    }
    // fp32 state and residuals: relative error of order sites * 2^-24 * |terms|, and x' = fp32(x + c)
    // rounds by up to 2^-24 |x'| ~ 3e-7 per rank (1e-6 for three); 1e-5 of the
    // largest correction is two orders above that and far below a wrong recurrence (~1e-1).
    BOOST_TEST(scale > 0.0);
    BOOST_TEST(worst <= 1e-5 * scale + 1e-6, residual_mode_name(residual) << " worst " << worst << " scale " << scale);
  }
}

BOOST_AUTO_TEST_CASE(validation_rejects_out_of_range_coefficients) {
  CompensatorSpec spec;
  spec.eta = 1.5f;
  BOOST_TEST(spec.validate().message().find("eta") != std::string::npos);
  spec = CompensatorSpec{};
  spec.beta1 = 1.0f;
  BOOST_TEST(spec.validate().message().find("beta1") != std::string::npos);
  spec = CompensatorSpec{};
  BOOST_TEST(spec.validate().ok());
  spec.state_dtype = DType::kFloat16;
  BOOST_TEST(spec.validate().message().find("state dtype") != std::string::npos);
  spec.state_dtype = DType::kBFloat16;
  BOOST_TEST(spec.validate().ok());
}

// bf16 state: every update is the fp32 update of the stored (bf16) value, rounded to bf16.
BOOST_AUTO_TEST_CASE(bf16_state_rounds_every_update) {
  for (CompensatorMode mode : {CompensatorMode::kSingle, CompensatorMode::kDual}) {
    CompensatorSpec spec;
    spec.mode = mode;
    spec.state_dtype = DType::kBFloat16;
    CompensatorSpec wide = spec;
    wide.state_dtype = DType::kFloat32;
    CompensatorState state;
    const std::size_t n = 257;
    std::size_t changed = 0;
    for (int step = 0; step < 4; ++step) {
      const std::vector<float> u = echo::test::activations(n, 10u + step);
      CompensatorState expected = state;  // previous bf16 state, advanced in fp32 then rounded
      compensator_update(wide, expected, u.data(), n);
      round_to_dtype(expected.m1.data(), n, DType::kBFloat16);
      if (mode == CompensatorMode::kDual) round_to_dtype(expected.m2.data(), n, DType::kBFloat16);
      CompensatorState fp32_step = state;
      compensator_update(wide, fp32_step, u.data(), n);
      compensator_update(spec, state, u.data(), n);
      BOOST_TEST(echo::test::first_bit_difference(state.m1.data(), expected.m1.data(), n) == -1);
      if (mode == CompensatorMode::kDual) {
        BOOST_TEST(echo::test::first_bit_difference(state.m2.data(), expected.m2.data(), n) == -1);
      }
      for (std::size_t i = 0; i < n; ++i) {
        BOOST_TEST(round_to_dtype(state.m1[i], DType::kBFloat16) == state.m1[i]);  // representable
        changed += echo::test::float_bits(state.m1[i]) != echo::test::float_bits(fp32_step.m1[i]);
      }
    }
    BOOST_TEST(changed > 0u, "bf16 rounding changed no value: the option would be a no-op");
  }
}

BOOST_AUTO_TEST_SUITE_END()
