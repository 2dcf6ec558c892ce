// Compensator units 'stream' (docs/numerics.md 6.1): the site a call needs, the unit-gain cases that
// are the paper's compensator bit for bit, and the apply and update steps through the row gains.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include "echo/allreduce.h"
#include "echo/numerics/compensator_step.h"
#include "echo/numerics/stream_units.h"
#include "echo/site.h"
#include "ranks_rows.h"
#include "test_util.h"

using namespace echo;

namespace {

using Inputs = echo::test::RankRows;

AllReduceSpec stream_spec(ResidualMode residual, CompensatorMode mode = CompensatorMode::kDual) {
  AllReduceSpec spec;
  spec.quant.bits = 4;
  spec.compensator.mode = mode;
  spec.compensator.residual = residual;
  spec.compensator.units = CompensatorUnits::kStream;
  return spec;
}

// Runs `calls` calls (same inputs each time) and returns the states and the last call's x'.
struct Run {
  std::vector<CompensatorState> states;
  std::vector<std::vector<float>> xp;
  std::vector<std::vector<float>> out;
};

Run run(const AllReduceSpec& spec, const SiteInfo* site, Inputs& data, int ranks, int calls) {
  Run result;
  result.states.resize(static_cast<std::size_t>(ranks));
  for (int k = 0; k < calls; ++k) {
    const Status s = site != nullptr
                         ? allreduce_at_site(*site, spec, ranks, data.count, data.in_ptr.data(), data.out_ptr.data(),
                                             result.states.data(), data.xp_ptr.data(), nullptr)
                         : allreduce(spec, ranks, data.count, data.in_ptr.data(), data.out_ptr.data(),
                                     result.states.data(), data.xp_ptr.data(), nullptr);
    BOOST_TEST_REQUIRE(s.ok(), s.message());
  }
  result.xp = data.xp;
  result.out = data.out;
  return result;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && echo::test::first_bit_difference(a.data(), b.data(), a.size()) == -1;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(stream_units)

BOOST_AUTO_TEST_CASE(a_forward_call_without_its_site_is_refused) {
  Inputs data(2, 2, 64, 11u);
  std::vector<CompensatorState> states(2);
  const Status s = allreduce(stream_spec(ResidualMode::kGlobal), 2, data.count, data.in_ptr.data(),
                             data.out_ptr.data(), states.data(), nullptr, nullptr);
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(s.message().find("allreduce_at_site") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_site_whose_rows_do_not_divide_the_message_is_refused) {
  Inputs data(2, 2, 64, 12u);
  std::vector<CompensatorState> states(2);
  const SiteInfo site = post_norm_site(std::vector<float>(48, 1.0f));
  const Status s = allreduce_at_site(site, stream_spec(ResidualMode::kGlobal), 2, data.count, data.in_ptr.data(),
                                     data.out_ptr.data(), states.data(), nullptr, nullptr);
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(s.message().find("48 elements per row") != std::string::npos);
  SiteInfo zero = post_norm_site(std::vector<float>(64, 0.0f));
  BOOST_TEST(validate_site(zero, 128, CompensatorSpec{}).code() == StatusCode::kInvalidArgument);
}

BOOST_AUTO_TEST_CASE(backward_calls_and_the_compensator_off_need_no_site) {
  AllReduceSpec backward = stream_spec(ResidualMode::kGlobal);
  backward.direction = Direction::kBackward;
  AllReduceSpec off = stream_spec(ResidualMode::kGlobal, CompensatorMode::kOff);
  BOOST_TEST(!needs_site(backward));
  BOOST_TEST(!needs_site(off));
  BOOST_TEST(needs_site(stream_spec(ResidualMode::kLocal)));
  // Backward in stream units is the paper's compensator bit for bit.
  AllReduceSpec site_units = backward;
  site_units.compensator.units = CompensatorUnits::kSite;
  Inputs a(3, 2, 64, 13u), b(3, 2, 64, 13u);
  const Run s = run(backward, nullptr, a, 3, 3);
  const Run t = run(site_units, nullptr, b, 3, 3);
  for (int r = 0; r < 3; ++r) BOOST_TEST(same_bits(s.xp[r], t.xp[r]));
}

BOOST_AUTO_TEST_CASE(a_site_without_a_post_norm_is_the_papers_compensator) {
  for (ResidualMode residual : {ResidualMode::kGlobal, ResidualMode::kLocal}) {
    for (CompensatorMode mode : {CompensatorMode::kSingle, CompensatorMode::kDual}) {
      AllReduceSpec stream = stream_spec(residual, mode);
      AllReduceSpec site_units = stream;
      site_units.compensator.units = CompensatorUnits::kSite;
      Inputs a(4, 3, 128, 21u), b(4, 3, 128, 21u);
      const SiteInfo pre_norm;  // has_post_norm = false
      const Run s = run(stream, &pre_norm, a, 4, 4);
      const Run t = run(site_units, nullptr, b, 4, 4);
      for (int r = 0; r < 4; ++r) {
        BOOST_TEST(same_bits(s.xp[r], t.xp[r]));
        BOOST_TEST(same_bits(s.out[r], t.out[r]));
        BOOST_TEST(same_bits(s.states[r].m1, t.states[r].m1));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(unit_gains_are_the_papers_compensator) {
  // Rows of +-1 have RMS 1, weights of 1 have RMS 1: G = R = 1 on every row, every rank.
  const int ranks = 2;
  const std::size_t width = 96, rows = 2;
  Inputs a(ranks, rows, width, 31u), b(ranks, rows, width, 31u);
  for (Inputs* d : {&a, &b}) {
    for (auto& x : d->in) {
      for (float& v : x) v = v < 0.0f ? -1.0f : 1.0f;
    }
  }
  const SiteInfo site = post_norm_site(std::vector<float>(width, 1.0f));
  BOOST_TEST(site.weight_rms == 1.0f);
  for (ResidualMode residual : {ResidualMode::kGlobal, ResidualMode::kLocal}) {
    AllReduceSpec stream = stream_spec(residual);
    AllReduceSpec site_units = stream;
    site_units.compensator.units = CompensatorUnits::kSite;
    const Run s = run(stream, &site, a, ranks, 3);
    const Run t = run(site_units, nullptr, b, ranks, 3);
    for (int r = 0; r < ranks; ++r) BOOST_TEST(same_bits(s.states[r].m1, t.states[r].m1));
  }
}

BOOST_AUTO_TEST_CASE(apply_and_update_pass_through_each_rows_gains) {
  const int ranks = 3;
  const std::size_t width = 64, rows = 4;
  std::vector<float> weights(width);
  for (std::size_t e = 0; e < width; ++e) weights[e] = 1.0f + 0.03f * static_cast<float>(e % 7);
  const SiteInfo site = post_norm_site(weights);
  for (ResidualMode residual : {ResidualMode::kGlobal, ResidualMode::kLocal}) {
    const AllReduceSpec spec = stream_spec(residual);
    AllReduceSpec site_units = spec;
    site_units.compensator.units = CompensatorUnits::kSite;
    Inputs a(ranks, rows, width, 41u), b(ranks, rows, width, 41u);
    // First call: the state is empty, so x' and the outputs are the site units' ones; the averages
    // take (1 - beta_j) * fp32(u * G) where site units take (1 - beta_j) * u.
    const Run s = run(spec, &site, a, ranks, 1);
    const Run t = run(site_units, nullptr, b, ranks, 1);
    const float ob1 = numerics::one_minus(spec.compensator.beta1);
    const float oa = numerics::one_minus(spec.compensator.a);
    bool gains_differ = false;
    for (int r = 0; r < ranks; ++r) {
      BOOST_TEST_REQUIRE(same_bits(s.out[r], t.out[r]));
      for (std::size_t row = 0; row < rows; ++row) {
        const float* x = a.in[r].data() + row * width;  // the rank's row as the call rounds it
        std::vector<float> xr(x, x + width);
        round_to_dtype(xr.data(), width, spec.dtype);
        const float rho = numerics::row_rms(numerics::row_sum_of_squares(xr.data(), width), static_cast<float>(width));
        const numerics::StreamGains g = numerics::stream_gains(site.weight_rms, rho);
        BOOST_TEST_REQUIRE(g.to_stream > 0.0f);
        gains_differ = gains_differ || g.to_stream != 1.0f;
        for (std::size_t e = row * width; e < (row + 1) * width; ++e) {
          // The global residual recomputed through the documented steps (the local one is checked
          // through the second call's apply below).
          if (residual == ResidualMode::kGlobal) {
            const float u = numerics::global_residual(t.xp[r][e], t.out[r][e], static_cast<float>(ranks));
            const float m1 = numerics::ema_step(spec.compensator.beta1, 0.0f, ob1, numerics::to_stream(u, g.to_stream));
            BOOST_TEST(echo::test::float_bits(s.states[r].m1[e]) == echo::test::float_bits(m1));
          }
        }
      }
    }
    BOOST_TEST(gains_differ);
    // Second call: x' = fp32(x + fp32(c0 * R)) with c0 from the averages the first call left.
    std::vector<CompensatorState> states = s.states;
    Inputs c(ranks, rows, width, 41u);
    std::vector<CompensatorState> before = states;
    BOOST_TEST_REQUIRE(allreduce_at_site(site, spec, ranks, c.count, c.in_ptr.data(), c.out_ptr.data(), states.data(),
                                         c.xp_ptr.data(), nullptr).ok());
    for (int r = 0; r < ranks; ++r) {
      std::vector<float> xr = c.in[r];
      round_to_dtype(xr.data(), xr.size(), spec.dtype);
      for (std::size_t row = 0; row < rows; ++row) {
        const float rho = numerics::row_rms(numerics::row_sum_of_squares(xr.data() + row * width, width),
                                            static_cast<float>(width));
        const numerics::StreamGains g = numerics::stream_gains(site.weight_rms, rho);
        for (std::size_t e = row * width; e < (row + 1) * width; ++e) {
          const float c0 = numerics::dual_correction(spec.compensator.eta, spec.compensator.a, oa, before[r].m1[e],
                                                     before[r].m2[e]);
          const float expected = numerics::compensate(xr[e], numerics::from_stream(c0, g.from_stream));
          BOOST_TEST(echo::test::float_bits(c.xp[r][e]) == echo::test::float_bits(expected));
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(the_row_sum_of_squares_is_the_lanes_then_the_butterfly) {
  // 64 ones: every lane holds 2, the butterfly 64, exactly; an arbitrary row within a few units of
  // rounding of the float64 sum (kRowSumTolerance: 32 lane sums of up to n/32 roundings each, then 5
  // levels, each within 2^-24 relative).
  const std::vector<float> ones(64, 1.0f);
  BOOST_TEST(numerics::row_sum_of_squares(ones.data(), ones.size()) == 64.0f);
  constexpr double kRowSumTolerance = 1e-5;
  const std::vector<float> x = echo::test::activations(640, 7u);
  double exact = 0.0;
  for (float v : x) exact += static_cast<double>(v) * v;
  const double q = numerics::row_sum_of_squares(x.data(), x.size());
  BOOST_TEST(std::fabs(q - exact) <= kRowSumTolerance * exact);
  // A row whose RMS is 0 carries nothing.
  const numerics::StreamGains none = numerics::stream_gains(1.0f, 0.0f);
  BOOST_TEST(none.to_stream == 0.0f);
  BOOST_TEST(none.from_stream == 0.0f);
}

// Steps 6 and 7: the profile divides each feature's correction by f_j and multiplies its residual
// by f_j; the clip clamps each correction to clip * rho of its row. Checked against the documented
// steps on a second call whose corrections the clip reaches.
BOOST_AUTO_TEST_CASE(the_profile_and_the_clip_follow_the_documented_steps) {
  const int ranks = 3;
  const std::size_t width = 64, rows = 3;
  std::vector<float> weights(width);
  for (std::size_t e = 0; e < width; ++e) weights[e] = (e % 5 == 0 ? 0.01f : 1.0f) + 0.3f * static_cast<float>(e % 7);
  const SiteInfo site = post_norm_site(weights);
  AllReduceSpec spec = stream_spec(ResidualMode::kGlobal);
  spec.compensator.profile = CompensatorProfile::kSqrt;
  spec.compensator.clip = 0.02f;
  AllReduceSpec flat = stream_spec(ResidualMode::kGlobal);
  Inputs a(ranks, rows, width, 51u), b(ranks, rows, width, 51u);
  const Run s = run(spec, &site, a, ranks, 1);
  const Run t = run(flat, &site, b, ranks, 1);
  std::vector<float> f(width);
  for (std::size_t j = 0; j < width; ++j) f[j] = numerics::profile_factor(weights[j], site.weight_rms);
  const float ob1 = numerics::one_minus(spec.compensator.beta1);
  const float oa = numerics::one_minus(spec.compensator.a);
  for (int r = 0; r < ranks; ++r) {
    BOOST_TEST_REQUIRE(same_bits(s.out[r], t.out[r]));  // the first call applies nothing
    BOOST_TEST(!same_bits(s.states[r].m1, t.states[r].m1));
    for (std::size_t row = 0; row < rows; ++row) {
      std::vector<float> xr(a.in[r].begin() + row * width, a.in[r].begin() + (row + 1) * width);
      round_to_dtype(xr.data(), width, spec.dtype);
      const float rho = numerics::row_rms(numerics::row_sum_of_squares(xr.data(), width), static_cast<float>(width));
      const numerics::StreamGains g = numerics::stream_gains(site.weight_rms, rho);
      for (std::size_t j = 0; j < width; ++j) {
        const std::size_t e = row * width + j;
        const float u = numerics::global_residual(t.xp[r][e], t.out[r][e], static_cast<float>(ranks));
        const float v = numerics::to_profile(numerics::to_stream(u, g.to_stream), f[j]);
        const float m1 = numerics::ema_step(spec.compensator.beta1, 0.0f, ob1, v);
        BOOST_TEST(echo::test::float_bits(s.states[r].m1[e]) == echo::test::float_bits(m1));
      }
    }
  }
  // Second call: x' = fp32(x + clamp(fp32(fp32(c0 * R) / f_j), b)), b = fp32(clip * rho).
  std::vector<CompensatorState> states = s.states;
  const std::vector<CompensatorState> before = states;
  Inputs c(ranks, rows, width, 51u);
  BOOST_TEST_REQUIRE(allreduce_at_site(site, spec, ranks, c.count, c.in_ptr.data(), c.out_ptr.data(), states.data(),
                                       c.xp_ptr.data(), nullptr).ok());
  std::size_t clipped = 0, profiled = 0;
  for (int r = 0; r < ranks; ++r) {
    std::vector<float> xr = c.in[r];
    round_to_dtype(xr.data(), xr.size(), spec.dtype);
    for (std::size_t row = 0; row < rows; ++row) {
      const float rho =
          numerics::row_rms(numerics::row_sum_of_squares(xr.data() + row * width, width), static_cast<float>(width));
      const numerics::StreamGains g = numerics::stream_gains(site.weight_rms, rho);
      const float bound = numerics::clip_bound(spec.compensator.clip, rho);
      for (std::size_t j = 0; j < width; ++j) {
        const std::size_t e = row * width + j;
        const float c0 = numerics::dual_correction(spec.compensator.eta, spec.compensator.a, oa, before[r].m1[e],
                                                   before[r].m2[e]);
        const float unclipped = numerics::from_profile(numerics::from_stream(c0, g.from_stream), f[j]);
        const float corr = numerics::clip_correction(unclipped, bound);
        clipped += corr != unclipped ? 1 : 0;
        profiled += f[j] != 1.0f ? 1 : 0;
        const float expected = numerics::compensate(xr[e], corr);
        BOOST_TEST(echo::test::float_bits(c.xp[r][e]) == echo::test::float_bits(expected));
      }
    }
  }
  BOOST_TEST(clipped > 0u);                               // the clip acted somewhere ...
  BOOST_TEST(clipped < static_cast<std::size_t>(ranks) * c.count);  // ... but not everywhere
  BOOST_TEST(profiled > 0u);
}

BOOST_AUTO_TEST_CASE(the_profile_factor_is_floored_and_the_clip_passes_nan) {
  // |w_j| = w: f_j = 1; a weight of 0 (or below 0.1 w) is floored: f_j = sqrt(0.1), either sign.
  BOOST_TEST(numerics::profile_factor(2.0f, 2.0f) == 1.0f);
  BOOST_TEST(numerics::profile_factor(-2.0f, 2.0f) == 1.0f);
  const float floored = numerics::sqrt_rn(numerics::div_rn(numerics::mul_rn(0.1f, 2.0f), 2.0f));
  BOOST_TEST(numerics::profile_factor(0.0f, 2.0f) == floored);
  BOOST_TEST(numerics::profile_factor(-0.05f, 2.0f) == floored);
  BOOST_TEST(numerics::profile_factor(8.0f, 2.0f) == 2.0f);
  BOOST_TEST(numerics::clip_correction(3.0f, 1.0f) == 1.0f);
  BOOST_TEST(numerics::clip_correction(-3.0f, 1.0f) == -1.0f);
  BOOST_TEST(numerics::clip_correction(0.5f, 1.0f) == 0.5f);
  BOOST_TEST(std::isnan(numerics::clip_correction(std::nanf(""), 1.0f)));
}

BOOST_AUTO_TEST_CASE(a_profile_or_clip_outside_stream_units_or_without_weights_is_refused) {
  AllReduceSpec site_units = stream_spec(ResidualMode::kLocal);
  site_units.compensator.units = CompensatorUnits::kSite;
  site_units.compensator.clip = 1.0f;
  Status s = site_units.compensator.validate();
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(s.message().find("units 'stream' only") != std::string::npos);
  site_units.compensator.clip = 0.0f;
  site_units.compensator.profile = CompensatorProfile::kSqrt;
  BOOST_TEST(site_units.compensator.validate().code() == StatusCode::kInvalidArgument);
  for (float bad : {-1.0f, std::nanf(""), INFINITY}) {
    AllReduceSpec spec = stream_spec(ResidualMode::kLocal);
    spec.compensator.clip = bad;
    s = spec.compensator.validate();
    BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
    BOOST_TEST(s.message().find("clip must be finite") != std::string::npos);
  }
  // Profile 'sqrt' at a post-norm site that does not hold its weights, or holds a non-finite one.
  AllReduceSpec spec = stream_spec(ResidualMode::kLocal);
  spec.compensator.profile = CompensatorProfile::kSqrt;
  Inputs data(2, 2, 64, 61u);
  std::vector<CompensatorState> states(2);
  SiteInfo site = post_norm_site(std::vector<float>(64, 1.0f));
  site.weights.clear();
  s = allreduce_at_site(site, spec, 2, data.count, data.in_ptr.data(), data.out_ptr.data(), states.data(), nullptr,
                        nullptr);
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(s.message().find("post-norm weights") != std::string::npos);
  site = post_norm_site(std::vector<float>(64, 1.0f));
  site.weights[5] = std::nanf("");
  s = allreduce_at_site(site, spec, 2, data.count, data.in_ptr.data(), data.out_ptr.data(), states.data(), nullptr,
                        nullptr);
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(s.message().find("weight 5 is not finite") != std::string::npos);
  // A site without a post-norm needs no weights: unit gains, no profile, no clip.
  const SiteInfo pre_norm;
  BOOST_TEST(allreduce_at_site(pre_norm, spec, 2, data.count, data.in_ptr.data(), data.out_ptr.data(), states.data(),
                               nullptr, nullptr).ok());
}

// Step 8, gains 'sum': the update at the delivered rows' RMS, the apply at the own RMS times the ratio
// of the last site of the same kind (else the other kind's), the ratios replaced after each call.
BOOST_AUTO_TEST_CASE(gains_sum_update_at_the_delivered_rms_and_apply_the_same_kinds_ratio) {
  const int ranks = 3;
  const std::size_t width = 64, rows = 4;
  std::vector<float> weights(width);
  for (std::size_t e = 0; e < width; ++e) weights[e] = 0.5f + 0.07f * static_cast<float>(e % 9);
  SiteInfo site = post_norm_site(weights);
  AllReduceSpec spec = stream_spec(ResidualMode::kGlobal);
  spec.compensator.gains = CompensatorGains::kSum;
  const float ob1 = numerics::one_minus(spec.compensator.beta1);
  const float oa = numerics::one_minus(spec.compensator.a);
  const float n = static_cast<float>(width);
  auto rms_of = [&](const float* row) { return numerics::row_rms(numerics::row_sum_of_squares(row, width), n); };
  auto rounded = [&](const std::vector<float>& x) {
    std::vector<float> xr = x;
    round_to_dtype(xr.data(), xr.size(), spec.dtype);
    return xr;
  };
  std::vector<CompensatorState> states(static_cast<std::size_t>(ranks));
  // Three calls at sites of kind attention, MLP, attention, each with inputs at other scales.
  const SiteKind kinds[] = {SiteKind::kAttention, SiteKind::kMlp, SiteKind::kAttention};
  for (int call = 0; call < 3; ++call) {
    site.kind = kinds[call];
    Inputs d(ranks, rows, width, 71u + static_cast<std::uint32_t>(call));
    const std::vector<CompensatorState> before = states;
    BOOST_TEST_REQUIRE(allreduce_at_site(site, spec, ranks, d.count, d.in_ptr.data(), d.out_ptr.data(),
                                         states.data(), d.xp_ptr.data(), nullptr).ok());
    const int kind = static_cast<int>(kinds[call]);
    for (int r = 0; r < ranks; ++r) {
      const std::vector<float> xr = rounded(d.in[r]);
      // The ratios this call applied: the same kind's, else the other kind's (none on the first call).
      const std::vector<float>& same = before[r].row_ratios[static_cast<std::size_t>(kind)];
      const std::vector<float>& applied = !same.empty() ? same : before[r].row_ratios[static_cast<std::size_t>(1 - kind)];
      BOOST_TEST((call == 0 ? applied.empty() : applied.size() == rows));
      BOOST_TEST_REQUIRE(states[r].row_ratios[static_cast<std::size_t>(kind)].size() == rows);
      for (std::size_t t = 0; t < rows; ++t) {
        const float rho = rms_of(xr.data() + t * width);
        const float r_sum = rms_of(d.out[r].data() + t * width);
        BOOST_TEST(echo::test::float_bits(states[r].row_ratios[static_cast<std::size_t>(kind)][t]) ==
                   echo::test::float_bits(numerics::sum_ratio(r_sum, rho)));
        const float from = call == 0 ? 0.0f : numerics::sum_from_stream(site.weight_rms, applied[t], rho);
        const float to = numerics::stream_gains(site.weight_rms, r_sum).to_stream;
        BOOST_TEST_REQUIRE(to > 0.0f);
        for (std::size_t e = t * width; e < (t + 1) * width; ++e) {
          float expected = xr[e];
          if (call > 0) {
            const float c0 = numerics::dual_correction(spec.compensator.eta, spec.compensator.a, oa, before[r].m1[e],
                                                       before[r].m2[e]);
            expected = numerics::compensate(xr[e], numerics::from_stream(c0, from));
          }
          BOOST_TEST(echo::test::float_bits(d.xp[r][e]) == echo::test::float_bits(expected));
          const float u = numerics::global_residual(d.xp[r][e], d.out[r][e], static_cast<float>(ranks));
          const float m1 = numerics::ema_step(spec.compensator.beta1, call == 0 ? 0.0f : before[r].m1[e], ob1,
                                              numerics::to_stream(u, to));
          BOOST_TEST(echo::test::float_bits(states[r].m1[e]) == echo::test::float_bits(m1));
        }
      }
    }
  }
  // The third call (attention) applied the first call's attention ratios, not the MLP call's.
  for (CompensatorState& s : states) {
    BOOST_TEST(!s.row_ratios[0].empty());
    BOOST_TEST(!s.row_ratios[1].empty());
    s.reset();
    BOOST_TEST(s.row_ratios[0].empty());
    BOOST_TEST(s.row_ratios[1].empty());
  }
}

BOOST_AUTO_TEST_CASE(gains_sum_ratios_carry_nothing_where_a_row_is_zero_or_not_finite) {
  BOOST_TEST(numerics::sum_ratio(2.0f, 4.0f) == 0.5f);
  BOOST_TEST(numerics::sum_ratio(0.0f, 4.0f) == 0.0f);
  BOOST_TEST(numerics::sum_ratio(2.0f, 0.0f) == 0.0f);
  BOOST_TEST(numerics::sum_ratio(INFINITY, 4.0f) == 0.0f);
  BOOST_TEST(numerics::sum_ratio(std::nanf(""), 4.0f) == 0.0f);
  BOOST_TEST(numerics::sum_ratio(3e38f, 1e-38f) == 0.0f);  // the quotient overflows
  BOOST_TEST(numerics::sum_from_stream(2.0f, 0.5f, 8.0f) == 2.0f);
  BOOST_TEST(numerics::sum_from_stream(2.0f, 0.0f, 8.0f) == 0.0f);  // no ratio: no correction
  BOOST_TEST(numerics::sum_from_stream(0.0f, 0.5f, 8.0f) == 0.0f);
  BOOST_TEST(numerics::sum_from_stream(1e-38f, 3e38f, 1.0f) == 0.0f);
}

BOOST_AUTO_TEST_CASE(gains_sum_are_refused_outside_stream_units_without_a_kind_or_with_other_rows) {
  AllReduceSpec spec = stream_spec(ResidualMode::kLocal);
  spec.compensator.gains = CompensatorGains::kSum;
  AllReduceSpec site_units = spec;
  site_units.compensator.units = CompensatorUnits::kSite;
  Status s = site_units.compensator.validate();
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(s.message().find("gains 'sum'") != std::string::npos);
  BOOST_TEST((parse_compensator_gains("sum") == CompensatorGains::kSum));
  BOOST_TEST(!parse_compensator_gains("delivered").has_value());
  Inputs data(2, 2, 64, 81u);
  std::vector<CompensatorState> states(2);
  SiteInfo site = post_norm_site(std::vector<float>(64, 1.0f));
  s = allreduce_at_site(site, spec, 2, data.count, data.in_ptr.data(), data.out_ptr.data(), states.data(), nullptr,
                        nullptr);
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(s.message().find("site's kind") != std::string::npos);
  site.kind = SiteKind::kMlp;
  BOOST_TEST_REQUIRE(allreduce_at_site(site, spec, 2, data.count, data.in_ptr.data(), data.out_ptr.data(),
                                       states.data(), nullptr, nullptr).ok());
  // The same state on a message of other rows (same elements, rows of 32).
  SiteInfo narrow = post_norm_site(std::vector<float>(32, 1.0f));
  narrow.kind = SiteKind::kMlp;
  s = allreduce_at_site(narrow, spec, 2, data.count, data.in_ptr.data(), data.out_ptr.data(), states.data(), nullptr,
                        nullptr);
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(s.message().find("row ratios") != std::string::npos);
  // A site without a post-norm needs no kind.
  const SiteInfo pre_norm;
  BOOST_TEST(allreduce_at_site(pre_norm, spec, 2, data.count, data.in_ptr.data(), data.out_ptr.data(), states.data(),
                               nullptr, nullptr).ok());
}

BOOST_AUTO_TEST_SUITE_END()
