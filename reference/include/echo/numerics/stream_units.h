// The compensator's stream units (docs/numerics.md 6.1): per token row, the gains that carry the
// state in residual-stream units through a site's post-norm, and the row RMS they are made of.
#pragma once

#include <cstddef>

#include "echo/numerics/dtype_rounding.h"
#include "echo/numerics/host_device.h"

namespace echo::numerics {

// A row's sum of squares is formed by this many lane sums (a warp's lanes on the device).
constexpr int kRowLanes = 32;

// One step of a lane's running sum: s = fp32(s + fp32(v * v)).
ECHO_HOST_DEVICE float add_square(float s, float v) { return add_rn(s, mul_rn(v, v)); }

// One level of the lanes' tree: lane l adds lane l ^ offset (offset 16, 8, 4, 2, 1 in turn). Both
// operands are the same two values for lanes l and l ^ offset, so every lane holds the same sum.
ECHO_HOST_DEVICE float add_lanes(float mine, float other) { return add_rn(mine, other); }

// The sum of squares of v[0..n) in the contract's order: lane l sums v[l], v[l + 32], ... left to
// right from 0, then the lanes' xor tree; the host form of what one warp computes.
inline float row_sum_of_squares(const float* v, std::size_t n) {
  float lanes[kRowLanes];
  for (int l = 0; l < kRowLanes; ++l) {
    float s = 0.0f;
    for (std::size_t j = static_cast<std::size_t>(l); j < n; j += kRowLanes) s = add_square(s, v[j]);
    lanes[l] = s;
  }
  for (int offset = kRowLanes / 2; offset >= 1; offset /= 2) {
    float next[kRowLanes];
    for (int l = 0; l < kRowLanes; ++l) next[l] = add_lanes(lanes[l], lanes[l ^ offset]);
    for (int l = 0; l < kRowLanes; ++l) lanes[l] = next[l];
  }
  return lanes[0];
}

// rho = fp32(sqrt(fp32(q / float(n)))): the RMS of a row of n values whose sum of squares is q
// (n < 2^24, so float(n) is exact).
ECHO_HOST_DEVICE float row_rms(float sum_of_squares, float n) { return sqrt_rn(div_rn(sum_of_squares, n)); }

// The two gains of one row: to_stream G = fp32(w / rho) takes a residual into stream units (the
// update), from_stream R = fp32(rho / w) takes the correction back into the site's (the apply).
// A row whose rho or w is 0 or not finite, or whose gains are not finite, carries nothing: 0 and 0.
struct StreamGains {
  float to_stream;
  float from_stream;
};

ECHO_HOST_DEVICE StreamGains stream_gains(float weight_rms, float rho) {
  const bool usable = rho > 0.0f && is_finite(rho) && weight_rms > 0.0f && is_finite(weight_rms);
  if (!usable) return {0.0f, 0.0f};
  const float g = div_rn(weight_rms, rho);
  const float r = div_rn(rho, weight_rms);
  if (!is_finite(g) || !is_finite(r)) return {0.0f, 0.0f};
  return {g, r};
}

// The gains of a site without a post-norm (and of every backward call): 1 and 1, so each step below
// is the paper's bit for bit.
ECHO_HOST_DEVICE StreamGains unit_gains() { return {1.0f, 1.0f}; }

// Apply: the correction c0 of numerics 6 in the site's units, c = fp32(c0 * R).
ECHO_HOST_DEVICE float from_stream(float correction, float from_stream_gain) {
  return mul_rn(correction, from_stream_gain);
}

// Update: the residual u in stream units, fp32(u * G), which the averages take in place of u.
ECHO_HOST_DEVICE float to_stream(float residual, float to_stream_gain) {
  return mul_rn(residual, to_stream_gain);
}

// Numerics 6.1 step 8, gains 'sum'. The ratio a rank keeps of a row after its call:
// kappa = fp32(r / rho), r the delivered sum's row RMS and rho the rank's own; 0 where r or rho is 0
// or not finite, or the quotient is not finite.
ECHO_HOST_DEVICE float sum_ratio(float sum_rms, float own_rms) {
  const bool usable = sum_rms > 0.0f && is_finite(sum_rms) && own_rms > 0.0f && is_finite(own_rms);
  if (!usable) return 0.0f;
  const float kappa = div_rn(sum_rms, own_rms);
  return is_finite(kappa) ? kappa : 0.0f;
}

// The apply's gain at the next site from such a ratio: the estimate e = fp32(kappa * rho) of the sum's
// row RMS, then R = fp32(e / w); 0 where e or w is not > 0 and finite, or R is not finite.
ECHO_HOST_DEVICE float sum_from_stream(float weight_rms, float ratio, float own_rms) {
  const float estimate = mul_rn(ratio, own_rms);
  const bool usable = estimate > 0.0f && is_finite(estimate) && weight_rms > 0.0f && is_finite(weight_rms);
  if (!usable) return 0.0f;
  const float r = div_rn(estimate, weight_rms);
  return is_finite(r) ? r : 0.0f;
}

// Numerics 6.1 step 6, profile 'sqrt': feature j's factor f_j = fp32(sqrt(fp32(a_j / w))), with
// a_j = |w_j| floored at fp32(kProfileFloor * w) (w the weights' RMS); f_j is in [sqrt(0.1), sqrt(H)].
constexpr float kProfileFloor = 0.1f;

ECHO_HOST_DEVICE float profile_factor(float weight, float weight_rms) {
  const float floor = mul_rn(kProfileFloor, weight_rms);
  const float magnitude = weight < 0.0f ? -weight : weight;
  const float a = magnitude > floor ? magnitude : floor;
  return sqrt_rn(div_rn(a, weight_rms));
}

// Apply with the profile: fp32(c / f_j); update: fp32(g * f_j).
ECHO_HOST_DEVICE float from_profile(float correction, float factor) { return div_rn(correction, factor); }
ECHO_HOST_DEVICE float to_profile(float residual, float factor) { return mul_rn(residual, factor); }

// Numerics 6.1 step 7: the clip's bound b = fp32(clip * rho) of a row, and the correction clamped to
// [-b, b], written so that a NaN correction passes through unchanged.
ECHO_HOST_DEVICE float clip_bound(float clip, float rho) { return mul_rn(clip, rho); }

ECHO_HOST_DEVICE float clip_correction(float correction, float bound) {
  if (correction > bound) return bound;
  if (correction < -bound) return -bound;
  return correction;
}

}  // namespace echo::numerics
