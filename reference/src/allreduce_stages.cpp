// The stages of the reference all-reduce (docs/numerics.md sections 2.6 and 4-6), each over the
// simulated ranks' buffers. The operations and their order are the contract; the loops are plain.
#include "allreduce_stages.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "echo/numerics/backward_scale.h"
#include "echo/numerics/compensator_step.h"
#include "echo/numerics/deficit_loop.h"
#include "echo/rotation.h"
#include "quantize_detail.h"

namespace echo {
namespace {

// Sizes every buffer to count elements for `ranks` ranks, keeping capacity between calls.
void size_buffers(std::vector<Buffer>& buffers, int ranks, std::size_t count) {
  buffers.resize(static_cast<std::size_t>(ranks));
  for (Buffer& b : buffers) b.resize(count);
}

void scale_by_power_of_two(const float* in, std::size_t count, int k, float* out) {
  const float f = numerics::pow2(k);
#pragma omp parallel for simd schedule(static) if (count >= (1u << 16))
  for (std::size_t i = 0; i < count; ++i) out[i] = in[i] * f;
}

float max_abs(const float* x, std::size_t count) {
  float m = 0.0f;
  int bad = 0;
#pragma omp parallel for simd reduction(max : m) reduction(| : bad) if (count >= (1u << 16))
  for (std::size_t i = 0; i < count; ++i) {
    const float a = std::fabs(x[i]);
    bad |= !numerics::is_finite(a);
    m = a > m ? a : m;
  }
  return bad ? std::numeric_limits<float>::infinity() : m;
}

// One quantization as its receiver sees it: encode, then decode (the rotation is outside it).
std::size_t encode(const CallPlan& c, const float* values, std::size_t len, Encoded& enc) {
  const QuantSpec& q = c.spec.quant;
  enc.codes.resize(len);
  enc.params.resize(q.num_groups(len));
  enc.outliers.resize(q.num_groups(len) * static_cast<std::size_t>(q.outliers));
  return detail::quantize(q, values, len, enc.codes.data(), enc.params.data(), enc.outliers.data(),
                          c.policy.scale_rounded_to_nearest);
}

void decode(const CallPlan& c, const Encoded& enc, std::size_t len, float* out) {
  dequantize(c.spec.quant, enc.codes.data(), enc.params.data(), len, out, enc.outliers.data());
}

void transport(const CallPlan& c, const float* values, std::size_t len, float* out, Encoded& enc) {
  encode(c, values, len, enc);
  decode(c, enc, len, out);
}

// Groups of the message holding a non-finite value on any rank (the exact path's report).
std::size_t count_nonfinite_groups(const float* const* in, int ranks, std::size_t count, std::size_t group) {
  std::size_t groups = 0;
  for (std::size_t begin = 0; begin < count; begin += group) {
    const std::size_t end = std::min(count, begin + group);
    bool bad = false;
    for (int r = 0; r < ranks && !bad; ++r) {
      for (std::size_t e = begin; e < end && !bad; ++e) bad = !std::isfinite(in[r][e]);
    }
    groups += bad ? 1 : 0;
  }
  return groups;
}

// The row ratios a gains-'sum' call applies (numerics 6.1 step 8): the state's of the site's kind,
// else the other kind's, else none (nullptr).
const float* ratios_to_apply(const CallPlan& c, const CompensatorState& state) {
  const std::vector<float>& same = state.row_ratios[static_cast<std::size_t>(c.kind)];
  if (!same.empty()) return same.data();
  const std::vector<float>& other = state.row_ratios[static_cast<std::size_t>(1 - c.kind)];
  return other.empty() ? nullptr : other.data();
}

// Numerics 6.1 steps 1-3: the gains of each row of one rank's dtype(x), and with a clip each row's
// bound (step 7); with gains 'sum' R is step 8's from the state's ratios and rho is kept for the
// update (G is formed there).
void row_gains(const CallPlan& c, const float* x, const CompensatorState& state,
               std::vector<numerics::StreamGains>& gains, Buffer& bounds, Buffer& own_rms, Buffer& estimates) {
  const std::size_t rows = c.count / c.row_length;
  const float n = static_cast<float>(c.row_length);
  const float* ratios = c.sum_gains ? ratios_to_apply(c, state) : nullptr;
  gains.resize(rows);
  bounds.resize(c.clip > 0.0f ? rows : 0);
  own_rms.resize(c.sum_gains ? rows : 0);
  estimates.resize(c.deficit ? rows : 0);
  for (std::size_t t = 0; t < rows; ++t) {
    const float q = numerics::row_sum_of_squares(x + t * c.row_length, c.row_length);
    const float rho = numerics::row_rms(q, n);
    if (c.sum_gains) {
      const float ratio = ratios != nullptr ? ratios[t] : 0.0f;
      if (c.deficit) {
        estimates[t] = numerics::deficit_estimate(ratio, rho);  // mode 'deficit' forms R per feature
      } else {
        gains[t] = {0.0f, numerics::sum_from_stream(c.weight_rms, ratio, rho)};
      }
      own_rms[t] = rho;
    } else {
      gains[t] = numerics::stream_gains(c.weight_rms, rho);
    }
    if (c.clip > 0.0f) bounds[t] = numerics::clip_bound(c.clip, rho);
  }
}

// Numerics 6.1 step 8, after delivery: the RMS r of each row of the rank's delivered y (kept in
// `sum_rms`), each row's G = fp32(w / r) (mode 'deficit' forms G per feature instead), and the ratio
// fp32(r / rho) of each row, which replaces the state's ratios of the site's kind.
void sum_gains_after_delivery(const CallPlan& c, const float* y, const Buffer& own_rms,
                              std::vector<numerics::StreamGains>& gains, Buffer& sum_rms, CompensatorState& state) {
  const std::size_t rows = c.count / c.row_length;
  const float n = static_cast<float>(c.row_length);
  std::vector<float>& ratios = state.row_ratios[static_cast<std::size_t>(c.kind)];
  ratios.resize(rows);
  sum_rms.resize(rows);
  for (std::size_t t = 0; t < rows; ++t) {
    const float r = numerics::row_rms(numerics::row_sum_of_squares(y + t * c.row_length, c.row_length), n);
    sum_rms[t] = r;
    if (!c.deficit) gains[t].to_stream = numerics::stream_gains(c.weight_rms, r).to_stream;
    ratios[t] = numerics::sum_ratio(r, own_rms[t]);
  }
}

// Numerics 6.1 step 6: f_j of every feature (profile 'sqrt'), else empty.
void profile_factors(const CallPlan& c, Buffer& factors) {
  factors.resize(c.weights != nullptr ? c.row_length : 0);
  for (std::size_t j = 0; j < factors.size(); ++j) factors[j] = numerics::profile_factor(c.weights[j], c.weight_rms);
}

// Numerics 6.1 steps 4, 6 and 7: x' = fp32(x + c) per element, c = fp32(c0 * R) (c0 the correction
// of numerics 6), then divided by the feature's f_j and clamped to the row's bound where the spec
// says; an empty state applies nothing.
void apply_in_stream_units(const CallPlan& c, const CompensatorState& state, const float* x,
                           const std::vector<numerics::StreamGains>& gains, const Buffer& bounds,
                           const Buffer& factors, float* x_prime) {
  const CompensatorSpec& spec = c.spec.compensator;
  if (state.m1.size() != c.count) {
    for (std::size_t i = 0; i < c.count; ++i) x_prime[i] = numerics::canonical_nan(x[i]);
    return;
  }
  const float oa = numerics::one_minus(spec.a);
  for (std::size_t i = 0; i < c.count; ++i) {
    const std::size_t t = i / c.row_length;
    const float c0 = spec.mode == CompensatorMode::kSingle
                         ? numerics::single_correction(spec.eta, state.m1[i])
                         : numerics::dual_correction(spec.eta, spec.a, oa, state.m1[i], state.m2[i]);
    float corr = numerics::from_stream(c0, gains[t].from_stream);
    if (!factors.empty()) corr = numerics::from_profile(corr, factors[i - t * c.row_length]);
    if (!bounds.empty()) corr = numerics::clip_correction(corr, bounds[t]);
    x_prime[i] = numerics::canonical_nan(numerics::compensate(x[i], corr));
  }
}

// Numerics 6.1 steps 5 and 6: the residual in stream units, fp32(u * G) per element, then times the
// feature's f_j with the profile, in place.
void residual_to_stream(const CallPlan& c, const std::vector<numerics::StreamGains>& gains, const Buffer& factors,
                        float* u) {
  for (std::size_t i = 0; i < c.count; ++i) {
    const std::size_t t = i / c.row_length;
    u[i] = numerics::to_stream(u[i], gains[t].to_stream);
    if (!factors.empty()) u[i] = numerics::to_profile(u[i], factors[i - t * c.row_length]);
  }
}

// Numerics 6.2: wf_j of every feature (mode 'deficit' at a post-norm site), else empty.
void floor_deficit_weights(const CallPlan& c, Buffer& floored) {
  floored.resize(c.deficit ? c.row_length : 0);
  for (std::size_t j = 0; j < floored.size(); ++j) {
    floored[j] = numerics::deficit_weight(c.deficit_weights[j], c.weight_rms);
  }
}

// Numerics 6.2, apply at a post-norm site: c = fp32(fp32(eta * A) * fp32(e / wf_j)), clamped to the
// row's bound where the spec clips, x' = fp32(x + c); each c is kept for the update. An empty state
// applies nothing (c = 0, x' = x).
void apply_deficit(const CallPlan& c, const CompensatorState& state, const float* x, const Buffer& estimates,
                   const Buffer& bounds, const Buffer& floored, float* x_prime, Buffer& corrections) {
  corrections.assign(c.count, 0.0f);
  if (state.m1.size() != c.count) {
    for (std::size_t i = 0; i < c.count; ++i) x_prime[i] = numerics::canonical_nan(x[i]);
    return;
  }
  const float eta = c.spec.compensator.eta;
  for (std::size_t i = 0; i < c.count; ++i) {
    const std::size_t t = i / c.row_length;
    const float gain = numerics::deficit_from_stream(estimates[t], floored[i - t * c.row_length]);
    float corr = numerics::deficit_site_correction(eta, state.m1[i], gain);
    if (!bounds.empty()) corr = numerics::clip_correction(corr, bounds[t]);
    corrections[i] = corr;
    x_prime[i] = numerics::canonical_nan(numerics::compensate(x[i], corr));
  }
}

// Numerics 6.2, update at a post-norm site, after sum_gains_after_delivery formed each delivered
// row's RMS r (and the ratios): A = S(A + fp32(fp32(u - c) * fp32(w_j / r))) per element.
void update_deficit(const CallPlan& c, const float* u, const Buffer& corrections, const Buffer& sum_rms,
                    CompensatorState& state) {
  const std::size_t rows = c.count / c.row_length;
  const bool bf16 = c.spec.compensator.state_dtype == DType::kBFloat16;
  if (state.m1.size() != c.count) state.m1.assign(c.count, 0.0f);
  for (std::size_t t = 0; t < rows; ++t) {
    const std::size_t row = t * c.row_length;
    const float r = sum_rms[t];
    for (std::size_t j = 0; j < c.row_length; ++j) {
      const float g = numerics::deficit_to_stream(c.deficit_weights[j], r);
      const float d = c.policy.deficit_correction_not_subtracted ? u[row + j]
                                                                 : numerics::undelivered(u[row + j], corrections[row + j]);
      state.m1[row + j] = numerics::round_state(numerics::deficit_step(state.m1[row + j], d, g), bf16);
    }
  }
}

}  // namespace

AlterationPolicy AlterationPolicy::of(Alteration alteration) {
  AlterationPolicy p;
  p.scale_rounded_to_nearest = alteration == Alteration::kScaleRoundedToNearest;
  p.ranks_summed_in_reverse = alteration == Alteration::kRanksSummedInReverse;
  p.deficit_correction_not_subtracted = alteration == Alteration::kDeficitCorrectionNotSubtracted;
  return p;
}

CallPlan::CallPlan(const AllReduceSpec& spec_, int ranks_, std::size_t count_, Alteration alteration,
                   const SiteInfo* site)
    : spec(spec_),
      ranks(ranks_),
      count(count_),
      segments(count_, spec_.quant.group, ranks_),
      policy(AlterationPolicy::of(alteration)),
      compensate(spec_.compensator.mode != CompensatorMode::kOff),
      local(compensate && spec_.compensator.residual == ResidualMode::kLocal),
      exact(count_ <= spec_.exact_max_count),
      exact_rounded(exact && exact_path_rounds_x_prime(spec_)),
      rotate(!exact && spec_.quant.rotation != Rotation::kNone),
      stream(compensate && site != nullptr && site->has_post_norm),
      row_length(stream ? site->row_length : 0),
      weight_rms(stream ? site->weight_rms : 0.0f),
      weights(stream && spec_.compensator.profile == CompensatorProfile::kSqrt ? site->weights.data() : nullptr),
      clip(stream ? spec_.compensator.clip : 0.0f),
      sum_gains(stream && spec_.compensator.gains == CompensatorGains::kSum),
      kind(sum_gains ? static_cast<int>(site->kind) : 0),
      deficit(stream && spec_.compensator.mode == CompensatorMode::kDeficit),
      deficit_weights(deficit ? site->weights.data() : nullptr) {}

namespace stages {

void sum_in_order(const float* const* in, int ranks, std::size_t count, const AlterationPolicy& policy,
                  float* acc) {
#pragma omp parallel for schedule(static) if (count >= (1u << 16))
  for (std::size_t e = 0; e < count; ++e) {
    float a = in[policy.rank_at(0, ranks)][e];
    for (int step = 1; step < ranks; ++step) a = a + in[policy.rank_at(step, ranks)][e];
    acc[e] = a;
  }
}

void prepare(const CallPlan& c, Buffers& b) {
  size_buffers(b.y, c.ranks, c.count);
  b.acc.resize(c.count);
  if (c.local) {
    size_buffers(b.residual, c.ranks, c.count);
    for (Buffer& u : b.residual) std::fill(u.begin(), u.end(), 0.0f);
  }
}

void apply(const CallPlan& c, const float* const* inputs, const CompensatorState* states,
           float* const* compensated, Buffers& b) {
  size_buffers(b.x_prime, c.ranks, c.count);
  if (c.stream) {
    b.gains.resize(static_cast<std::size_t>(c.ranks));
    b.clip_bounds.resize(static_cast<std::size_t>(c.ranks));
    b.own_rms.resize(static_cast<std::size_t>(c.ranks));
    b.estimates.resize(static_cast<std::size_t>(c.ranks));
    b.corrections.resize(static_cast<std::size_t>(c.ranks));
    profile_factors(c, b.profile);  // the site's, the same for every rank
    floor_deficit_weights(c, b.floored_weights);
  }
  for (int r = 0; r < c.ranks; ++r) {
    Buffer& xp = b.x_prime[r];
    std::copy_n(inputs[r], c.count, xp.data());
    round_to_dtype(xp.data(), c.count, c.spec.dtype);
    if (c.stream) {
      row_gains(c, xp.data(), states[r], b.gains[r], b.clip_bounds[r], b.own_rms[r], b.estimates[r]);
      if (c.deficit) {
        apply_deficit(c, states[r], xp.data(), b.estimates[r], b.clip_bounds[r], b.floored_weights, xp.data(),
                      b.corrections[r]);
      } else {
        apply_in_stream_units(c, states[r], xp.data(), b.gains[r], b.clip_bounds[r], b.profile, xp.data());
      }
    } else if (c.compensate) {
      compensator_apply(c.spec.compensator, states[r], xp.data(), c.count, xp.data());
    }
    if (compensated != nullptr && compensated[r] != nullptr) std::copy_n(xp.data(), c.count, compensated[r]);
  }
}

int backward_scale(const CallPlan& c, Buffers& b) {
  b.k = 0;
  if (c.spec.direction != Direction::kBackward) return 0;
  float m = 0.0f;
  for (int r = 0; r < c.ranks; ++r) m = std::max(m, max_abs(b.x_prime[r].data(), c.count));
  b.k = numerics::backward_exponent(m);
  if (b.k != 0) {
    size_buffers(b.scaled, c.ranks, c.count);
    for (int r = 0; r < c.ranks; ++r) scale_by_power_of_two(b.x_prime[r].data(), c.count, b.k, b.scaled[r].data());
  }
  return b.k;
}

void rotate(const CallPlan& c, Buffers& b) {
  b.use_rotated = c.rotate;
  if (!c.rotate) return;
  size_buffers(b.rotated, c.ranks, c.count);
  for (int r = 0; r < c.ranks; ++r) {
    std::copy_n(b.send(r), c.count, b.rotated[r].data());
    rotate_groups(c.spec.quant, b.rotated[r].data(), c.count);
  }
}

const float* push(const CallPlan& c, int i, std::size_t begin, std::size_t len, Buffers& b) {
  b.received.resize(len);
  transport(c, b.quantized_send(i) + begin, len, b.received.data(), b.encoded);
  if (c.local) {
    // The residual is in the compensator's (unrotated) units: the push de-rotated.
    const float* v = b.received.data();
    if (b.use_rotated) {
      b.unrotated.assign(b.received.begin(), b.received.end());
      unrotate_groups(c.spec.quant, b.unrotated.data(), len);
      v = b.unrotated.data();
    }
    const float unscale = numerics::pow2(-b.k);
    float* u = b.residual[i].data() + begin;
    const float* xp = b.x_prime[i].data() + begin;
    for (std::size_t e = 0; e < len; ++e) u[e] = numerics::local_residual(xp[e], v[e] * unscale);
  }
  return b.received.data();
}

void reduce(const CallPlan& c, int j, std::size_t begin, std::size_t len, Buffers& b) {
  float* acc = b.acc.data() + begin;
  for (int step = 0; step < c.ranks; ++step) {
    const int i = c.policy.rank_at(step, c.ranks);
    const float* v = i == j ? b.quantized_send(i) + begin : push(c, i, begin, len, b);
    if (step == 0) {
      std::copy_n(v, len, acc);
    } else {
      for (std::size_t e = 0; e < len; ++e) acc[e] = acc[e] + v[e];
    }
  }
}

void reduce_ring(const CallPlan& c, int j, std::size_t begin, std::size_t len, Buffers& b) {
  // The partial sum starts at rank j+1 and ends at the owner j, requantized at every hop.
  float* acc = b.acc.data() + begin;
  b.received.resize(len);
  const int first = (j + 1) % c.ranks;
  std::copy_n(b.quantized_send(first) + begin, len, acc);
  for (int hop = 1; hop < c.ranks; ++hop) {
    const int r = (first + hop) % c.ranks;
    transport(c, acc, len, b.received.data(), b.encoded);
    const float* own = b.quantized_send(r) + begin;
    for (std::size_t e = 0; e < len; ++e) acc[e] = b.received[e] + own[e];
  }
}

std::size_t gather(const CallPlan& c, std::size_t begin, std::size_t len, Buffers& b) {
  const std::size_t poisoned = encode(c, b.acc.data() + begin, len, b.encoded);
  for (int r = 0; r < c.ranks; ++r) {
    decode(c, b.encoded, len, b.y[r].data() + begin);
    unrotate_groups(c.spec.quant, b.y[r].data() + begin, len);
  }
  // The local residual's owner sum in unrotated units.
  if (b.use_rotated && c.local) unrotate_groups(c.spec.quant, b.acc.data() + begin, len);
  return poisoned;
}

std::size_t reduce_exact(const CallPlan& c, Buffers& b) {
  std::vector<const float*> terms(c.ranks);
  for (int r = 0; r < c.ranks; ++r) terms[r] = b.send(r);
  if (c.exact_rounded) {
    // Every rank's x' in bf16; in the local mode each rank's residual starts as its own rounding
    // error, on every element.
    size_buffers(b.rounded, c.ranks, c.count);
    for (int r = 0; r < c.ranks; ++r) {
      float* sr = b.rounded[r].data();
      std::copy_n(terms[r], c.count, sr);
      round_to_dtype(sr, c.count, c.spec.dtype);
      terms[r] = sr;
      if (c.local) {
        float* ur = b.residual[r].data();
        const float* xp = b.x_prime[r].data();
        for (std::size_t e = 0; e < c.count; ++e) ur[e] = numerics::local_residual(xp[e], sr[e]);
      }
    }
  }
  sum_in_order(terms.data(), c.ranks, c.count, c.policy, b.acc.data());
  for (int r = 0; r < c.ranks; ++r) std::copy(b.acc.begin(), b.acc.end(), b.y[r].begin());
  return count_nonfinite_groups(terms.data(), c.ranks, c.count, static_cast<std::size_t>(c.spec.quant.group));
}

void deliver(const CallPlan& c, Buffers& b) {
  for (int r = 0; r < c.ranks; ++r) {
    float* yr = b.y[r].data();
    if (b.k != 0) scale_by_power_of_two(yr, c.count, -b.k, yr);
    round_to_dtype(yr, c.count, c.spec.dtype);
  }
}

void update(const CallPlan& c, CompensatorState* states, Buffers& b) {
  const float unscale = numerics::pow2(-b.k);
  const float p = static_cast<float>(c.ranks);
  b.u.resize(c.count);
  for (int r = 0; r < c.ranks; ++r) {
    const float* yr = b.y[r].data();
    if (c.sum_gains) sum_gains_after_delivery(c, yr, b.own_rms[r], b.gains[r], b.sum_rms, states[r]);
    if (!c.local) {
      const float* xp = b.x_prime[r].data();
      for (std::size_t e = 0; e < c.count; ++e) b.u[e] = numerics::global_residual(xp[e], yr[e], p);
      if (c.stream) residual_to_stream(c, b.gains[r], b.profile, b.u.data());
      compensator_update(c.spec.compensator, states[r], b.u.data(), c.count);
      continue;
    }
    // Owner's own segment: the gather error; pushed segments were filled by push. On the exact
    // path with rounded x' the owner's own rounding error comes first.
    float* ur = b.residual[r].data();
    const float* acc = b.acc.data();
    for (std::size_t e = c.segments.begin(r); e < c.segments.end(r); ++e) {
      const float own = numerics::local_residual(acc[e] * unscale, yr[e]);
      ur[e] = c.exact_rounded ? numerics::local_residual_sum(ur[e], own) : own;
    }
    if (c.deficit) {
      update_deficit(c, ur, b.corrections[r], b.sum_rms, states[r]);
      continue;
    }
    if (c.stream) residual_to_stream(c, b.gains[r], b.profile, ur);
    compensator_update(c.spec.compensator, states[r], ur, c.count);
  }
}

}  // namespace stages
}  // namespace echo
