// The compensator's scalar steps (docs/numerics.md 6, paper Algorithm 1): the correction, the
// compensated input, the residuals, the averages' update and their storage type.
#pragma once

#include "echo/numerics/dtype_rounding.h"
#include "echo/numerics/host_device.h"

namespace echo::numerics {

// 1 - a and 1 - beta, formed once per call.
ECHO_HOST_DEVICE float one_minus(float v) { return sub_rn(1.0f, v); }

// c = fp32(eta * m1) (single average).
ECHO_HOST_DEVICE float single_correction(float eta, float m1) { return mul_rn(eta, m1); }

// c = fp32(eta * fp32(fp32(a * m1) + fp32((1 - a) * m2))) (dual).
ECHO_HOST_DEVICE float dual_correction(float eta, float a, float one_minus_a, float m1, float m2) {
  return mul_rn(eta, add_rn(mul_rn(a, m1), mul_rn(one_minus_a, m2)));
}

// x' = fp32(x + c).
ECHO_HOST_DEVICE float compensate(float x, float c) { return add_rn(x, c); }

// Global residual u = fp32(x' - fp32(y / P)), y the delivered output.
ECHO_HOST_DEVICE float global_residual(float x_prime, float y, float ranks) {
  return sub_rn(x_prime, div_rn(y, ranks));
}

// The same for a power-of-two P with inv_ranks = 1 / P: y * 2^-k is the correctly rounded y / 2^k,
// so one multiplication gives the same bits as the division.
ECHO_HOST_DEVICE float global_residual_pow2(float x_prime, float y, float inv_ranks) {
  return sub_rn(x_prime, mul_rn(y, inv_ranks));
}

// Local residual: one rounding error a rank injected, fp32(meant - delivered) (a push: x' minus
// its dequantized segment; the owner's gather: its exact sum minus the delivered output; the
// exact path: x' minus x' rounded to the dtype).
ECHO_HOST_DEVICE float local_residual(float meant, float delivered) { return sub_rn(meant, delivered); }

// Two local errors of one element, in the order they were made: fp32(first + second).
ECHO_HOST_DEVICE float local_residual_sum(float first, float second) { return add_rn(first, second); }

// m = fp32(fp32(beta * m) + fp32((1 - beta) * u)).
ECHO_HOST_DEVICE float ema_step(float beta, float m, float one_minus_beta, float u) {
  return add_rn(mul_rn(beta, m), mul_rn(one_minus_beta, u));
}

// An updated average as stored: rounded to bfloat16 (bf16 state) or kept in fp32, NaN canonical.
ECHO_HOST_DEVICE float round_state(float m, bool bf16_state) {
  return bf16_state ? round_to_bf16(m) : canonical_nan(m);
}

}  // namespace echo::numerics
