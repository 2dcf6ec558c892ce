// Compensator 'deficit' (docs/numerics.md 6.2): the settings it runs with, the apply's documented
// steps bit for bit, and the loop's invariant: the ranks' states sum to the stream's deficit.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "echo/allreduce.h"
#include "echo/numerics/compensator_step.h"
#include "echo/numerics/deficit_loop.h"
#include "echo/numerics/stream_units.h"
#include "echo/site.h"
#include "ranks_rows.h"
#include "test_util.h"

using namespace echo;

namespace {

// The float64 deficit and the fp32 states drift apart only by the states' fp32 roundings: a few
// ulps of the largest term per call, over six calls.
constexpr double kDeficitTolerance = 1e-5;

AllReduceSpec deficit_spec(float clip) {
  AllReduceSpec spec;
  spec.quant.bits = 4;
  spec.quant.group = 32;
  spec.dtype = DType::kFloat32;
  spec.compensator.mode = CompensatorMode::kDeficit;
  spec.compensator.residual = ResidualMode::kLocal;
  spec.compensator.units = CompensatorUnits::kStream;
  spec.compensator.gains = CompensatorGains::kSum;
  spec.compensator.clip = clip;
  return spec;
}

std::vector<float> norm_weights(std::size_t width) {
  std::vector<float> w(width);
  // Spread over three decades, a few negative and one zero (the floor and the sign both act).
  for (std::size_t e = 0; e < width; ++e) w[e] = (e % 7 == 3 ? -1.0f : 1.0f) * std::ldexp(1.0f + 0.1f * (e % 5), static_cast<int>(e % 11) - 5);
  w[5] = 0.0f;
  return w;
}

using Call = echo::test::RankRows;

float rms_of(const float* row, std::size_t width) {
  return numerics::row_rms(numerics::row_sum_of_squares(row, width), static_cast<float>(width));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(deficit_loop)

BOOST_AUTO_TEST_CASE(the_deficit_runs_only_with_the_settings_it_needs) {
  const CompensatorSpec good = deficit_spec(1.0f).compensator;
  BOOST_TEST(good.validate().ok());
  BOOST_TEST((parse_compensator_mode("deficit") == CompensatorMode::kDeficit));
  BOOST_TEST(std::string(compensator_mode_name(CompensatorMode::kDeficit)) == "deficit");
  CompensatorSpec bad[4] = {good, good, good, good};
  bad[0].units = CompensatorUnits::kSite;
  bad[0].clip = 0.0f;
  bad[0].gains = CompensatorGains::kOwn;
  bad[1].residual = ResidualMode::kGlobal;
  bad[2].gains = CompensatorGains::kOwn;
  bad[3].profile = CompensatorProfile::kSqrt;
  for (const CompensatorSpec& s : bad) {
    const Status status = s.validate();
    BOOST_TEST(status.code() == StatusCode::kInvalidArgument);
    BOOST_TEST(status.message().find("'deficit'") != std::string::npos, status.message());
  }
  // A post-norm site without its weights.
  SiteInfo site = post_norm_site(std::vector<float>(64, 1.0f));
  site.kind = SiteKind::kMlp;
  site.weights.clear();
  const Status s = validate_site(site, 128, good);
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(s.message().find("compensator 'deficit' needs the site's 64 post-norm weights") != std::string::npos,
             s.message());
}

BOOST_AUTO_TEST_CASE(the_floored_weight_keeps_its_sign_and_the_gains_carry_nothing_where_undefined) {
  BOOST_TEST(numerics::deficit_weight(-3.0f, 1.0f) == -3.0f);
  BOOST_TEST(numerics::deficit_weight(0.01f, 1.0f) == 0.1f);
  BOOST_TEST(numerics::deficit_weight(-0.01f, 1.0f) == -0.1f);
  BOOST_TEST(numerics::deficit_weight(0.0f, 2.0f) == 0.2f);
  BOOST_TEST(numerics::deficit_from_stream(2.0f, -0.5f) == -4.0f);
  BOOST_TEST(numerics::deficit_from_stream(0.0f, 0.5f) == 0.0f);  // no ratio yet: no correction
  BOOST_TEST(numerics::deficit_from_stream(std::nanf(""), 0.5f) == 0.0f);
  BOOST_TEST(numerics::deficit_from_stream(3e38f, 1e-38f) == 0.0f);  // overflows
  BOOST_TEST(numerics::deficit_to_stream(-2.0f, 4.0f) == -0.5f);
  BOOST_TEST(numerics::deficit_to_stream(2.0f, 0.0f) == 0.0f);
  BOOST_TEST(numerics::deficit_to_stream(2.0f, INFINITY) == 0.0f);
  BOOST_TEST(numerics::deficit_to_stream(3e38f, 1e-38f) == 0.0f);
}

// Six calls, post-norm sites of both kinds and pre-norm sites in turn, on the quantized path: every
// x' is the documented apply of the state before the call, and the ranks' states sum (in float64)
// to the deficit of the delivered stream, each call's sum_i x_i - y taken through diag(w) / r at a
// post-norm site.
BOOST_AUTO_TEST_CASE(the_apply_is_the_documented_steps_and_the_states_sum_to_the_deficit) {
  for (float clip : {0.0f, 1.0f}) {
    const int ranks = 4;
    const std::size_t width = 64, rows = 8;
    const AllReduceSpec spec = deficit_spec(clip);
    const std::vector<float> w = norm_weights(width);
    SiteInfo post = post_norm_site(w);
    const SiteInfo pre;
    const float eta = spec.compensator.eta;
    std::vector<CompensatorState> states(static_cast<std::size_t>(ranks));
    std::vector<double> deficit(rows * width, 0.0);
    const SiteKind kinds[] = {SiteKind::kAttention, SiteKind::kMlp};
    for (int call = 0; call < 6; ++call) {
      const bool post_norm = call % 3 != 2;
      post.kind = kinds[call % 2];
      const int kind = static_cast<int>(post.kind);
      Call d(ranks, rows, width, 301u + static_cast<std::uint32_t>(call));
      const std::vector<CompensatorState> before = states;
      const Status s = allreduce_at_site(post_norm ? post : pre, spec, ranks, d.count, d.in_ptr.data(),
                                         d.out_ptr.data(), states.data(), d.xp_ptr.data(), nullptr);
      BOOST_TEST_REQUIRE(s.ok(), s.message());
      for (int r = 0; r < ranks; ++r) {
        BOOST_TEST_REQUIRE(states[r].m1.size() == d.count);
        BOOST_TEST(states[r].m2.empty());
        const std::vector<float>& same = before[r].row_ratios[static_cast<std::size_t>(kind)];
        const std::vector<float>& ratios = !same.empty() ? same : before[r].row_ratios[static_cast<std::size_t>(1 - kind)];
        for (std::size_t t = 0; t < rows; ++t) {
          const float rho = rms_of(d.in[r].data() + t * width, width);
          for (std::size_t j = 0; j < width; ++j) {
            const std::size_t e = t * width + j;
            float expected = d.in[r][e];
            if (!before[r].m1.empty()) {
              float c = numerics::deficit_correction(eta, before[r].m1[e]);
              if (post_norm) {
                const float estimate = numerics::deficit_estimate(ratios.empty() ? 0.0f : ratios[t], rho);
                const float gain = numerics::deficit_from_stream(estimate, numerics::deficit_weight(w[j], post.weight_rms));
                c = numerics::deficit_site_correction(eta, before[r].m1[e], gain);
                if (clip > 0.0f) c = numerics::clip_correction(c, numerics::clip_bound(clip, rho));
              }
              expected = numerics::compensate(d.in[r][e], c);
            }
            BOOST_TEST(echo::test::float_bits(d.xp[r][e]) == echo::test::float_bits(expected));
          }
        }
      }
      // The call's deficit, sum_i x_i - y (every rank delivers the same y), in stream units.
      for (std::size_t t = 0; t < rows; ++t) {
        const double r_sum = static_cast<double>(rms_of(d.out[0].data() + t * width, width));
        for (std::size_t j = 0; j < width; ++j) {
          const std::size_t e = t * width + j;
          double lacking = -static_cast<double>(d.out[0][e]);
          for (int r = 0; r < ranks; ++r) lacking += static_cast<double>(d.in[r][e]);
          deficit[e] += post_norm ? lacking * static_cast<double>(w[j]) / r_sum : lacking;
        }
      }
      double worst = 0.0, scale = 0.0;
      for (std::size_t e = 0; e < d.count; ++e) {
        double sum = 0.0;
        for (int r = 0; r < ranks; ++r) sum += static_cast<double>(states[r].m1[e]);
        worst = std::max(worst, std::fabs(sum - deficit[e]));
        scale = std::max(scale, std::fabs(deficit[e]));
      }
      BOOST_TEST_REQUIRE(scale > 0.0);
      BOOST_TEST(worst <= kDeficitTolerance * scale, "call " << call << " clip " << clip << ": " << worst << " of " << scale);
    }
  }
}

// The state dtype bf16 stores every updated deficit rounded to bf16.
BOOST_AUTO_TEST_CASE(bf16_state_is_stored_rounded) {
  AllReduceSpec spec = deficit_spec(1.0f);
  spec.compensator.state_dtype = DType::kBFloat16;
  SiteInfo post = post_norm_site(norm_weights(64));
  post.kind = SiteKind::kAttention;
  std::vector<CompensatorState> states(2);
  for (int call = 0; call < 2; ++call) {
    Call d(2, 4, 64, 401u + static_cast<std::uint32_t>(call));
    BOOST_TEST_REQUIRE(allreduce_at_site(post, spec, 2, d.count, d.in_ptr.data(), d.out_ptr.data(), states.data(),
                                         nullptr, nullptr).ok());
  }
  bool moved = false;
  for (const CompensatorState& s : states) {
    for (float m : s.m1) {
      BOOST_TEST(echo::test::float_bits(m) == echo::test::float_bits(numerics::round_to_bf16(m)));
      moved |= m != 0.0f;
    }
  }
  BOOST_TEST(moved);
}

BOOST_AUTO_TEST_SUITE_END()
