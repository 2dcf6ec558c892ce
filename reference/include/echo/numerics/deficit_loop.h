// The compensator's mode 'deficit' (docs/numerics.md 6.2): a closed loop on what the residual stream
// still lacks of each rank's part. Its state A is that deficit in stream units; the apply injects a
// fraction of it through the inverse of the site's post-norm, and the update adds what the call
// left undelivered through the norm's first-order Jacobian diag(w) / r.
#pragma once

#include "echo/numerics/dtype_rounding.h"
#include "echo/numerics/host_device.h"
#include "echo/numerics/stream_units.h"

namespace echo::numerics {

// c = fp32(eta * A): the correction in stream units (and the whole correction where the gains are 1).
ECHO_HOST_DEVICE float deficit_correction(float eta, float deficit) { return mul_rn(eta, deficit); }

// The apply's divisor of feature j: |w_j| floored at fp32(kProfileFloor * w) (w the weights' RMS),
// with w_j's sign (+ for a zero weight).
ECHO_HOST_DEVICE float deficit_weight(float weight, float weight_rms) {
  const float floor = mul_rn(kProfileFloor, weight_rms);
  const float magnitude = weight < 0.0f ? -weight : weight;
  const float a = magnitude > floor ? magnitude : floor;
  return weight < 0.0f ? -a : a;
}

// The apply's gain of feature j, R_j = fp32(e / wf_j), e the estimate fp32(kappa * rho) of the sum's
// row RMS (numerics 6.1 step 8); 0 where e is not > 0 and finite, or R_j is not finite.
ECHO_HOST_DEVICE float deficit_from_stream(float estimate, float floored_weight) {
  if (!(estimate > 0.0f) || !is_finite(estimate)) return 0.0f;
  const float r = div_rn(estimate, floored_weight);
  return is_finite(r) ? r : 0.0f;
}

// The row estimate e = fp32(kappa * rho) itself (0 without a ratio: then every R_j is 0).
ECHO_HOST_DEVICE float deficit_estimate(float ratio, float own_rms) { return mul_rn(ratio, own_rms); }

// Apply at a post-norm site: c = fp32(fp32(eta * A) * R_j), before the clip.
ECHO_HOST_DEVICE float deficit_site_correction(float eta, float deficit, float from_stream_gain) {
  return mul_rn(deficit_correction(eta, deficit), from_stream_gain);
}

// The update's gain of feature j, G_j = fp32(w_j / r), r the delivered row's RMS; 0 where r is not
// > 0 and finite, or G_j is not finite.
ECHO_HOST_DEVICE float deficit_to_stream(float weight, float sum_rms) {
  if (!(sum_rms > 0.0f) || !is_finite(sum_rms)) return 0.0f;
  const float g = div_rn(weight, sum_rms);
  return is_finite(g) ? g : 0.0f;
}

// What the call left undelivered of the rank's part: d = fp32(u - c), u the local residual (taken
// against x' = x + c) and c the correction applied.
ECHO_HOST_DEVICE float undelivered(float residual, float correction) { return sub_rn(residual, correction); }

// The update, before the state's rounding: A + fp32(d * G_j) at a post-norm site, A + d elsewhere.
ECHO_HOST_DEVICE float deficit_step(float deficit, float undelivered_part, float to_stream_gain) {
  return add_rn(deficit, mul_rn(undelivered_part, to_stream_gain));
}
ECHO_HOST_DEVICE float deficit_step(float deficit, float undelivered_part) { return add_rn(deficit, undelivered_part); }

}  // namespace echo::numerics
