// Algorithm 1 of the paper over whole messages; the scalar steps are
// echo/numerics/compensator_step.h (shared with the CUDA kernels), docs/numerics.md section 6.
#include "echo/compensator.h"

#include <cmath>
#include <string>

#include "echo/numerics/compensator_step.h"
#include "echo/numerics/deficit_loop.h"
#include "echo/spec_fields.h"

namespace echo {

const char* compensator_mode_name(CompensatorMode mode) {
  switch (mode) {
    case CompensatorMode::kOff: return "off";
    case CompensatorMode::kSingle: return "single";
    case CompensatorMode::kDual: return "dual";
    case CompensatorMode::kDeficit: return "deficit";
  }
  return "unknown";
}

std::optional<CompensatorMode> parse_compensator_mode(std::string_view name) {
  if (name == "off") return CompensatorMode::kOff;
  if (name == "single") return CompensatorMode::kSingle;
  if (name == "dual") return CompensatorMode::kDual;
  if (name == "deficit") return CompensatorMode::kDeficit;
  return std::nullopt;
}

const char* residual_mode_name(ResidualMode mode) {
  return mode == ResidualMode::kLocal ? "local" : "global";
}

std::optional<ResidualMode> parse_residual_mode(std::string_view name) {
  if (name == "global") return ResidualMode::kGlobal;
  if (name == "local") return ResidualMode::kLocal;
  return std::nullopt;
}

const char* compensator_units_name(CompensatorUnits units) {
  return units == CompensatorUnits::kStream ? "stream" : "site";
}

std::optional<CompensatorUnits> parse_compensator_units(std::string_view name) {
  if (name == "site") return CompensatorUnits::kSite;
  if (name == "stream") return CompensatorUnits::kStream;
  return std::nullopt;
}

const char* compensator_profile_name(CompensatorProfile profile) {
  return profile == CompensatorProfile::kSqrt ? "sqrt" : "flat";
}

std::optional<CompensatorProfile> parse_compensator_profile(std::string_view name) {
  if (name == "flat") return CompensatorProfile::kFlat;
  if (name == "sqrt") return CompensatorProfile::kSqrt;
  return std::nullopt;
}

const char* compensator_gains_name(CompensatorGains gains) {
  return gains == CompensatorGains::kSum ? "sum" : "own";
}

std::optional<CompensatorGains> parse_compensator_gains(std::string_view name) {
  if (name == "own") return CompensatorGains::kOwn;
  if (name == "sum") return CompensatorGains::kSum;
  return std::nullopt;
}

Status CompensatorSpec::validate() const {
  auto in_unit = [](float v) { return v >= 0.0f && v <= 1.0f; };
  auto is_decay = [](float v) { return v >= 0.0f && v < 1.0f; };
  if (!in_unit(eta)) return Status(StatusCode::kInvalidArgument, "eta must be in [0, 1]");
  if (!in_unit(a)) return Status(StatusCode::kInvalidArgument, "a must be in [0, 1]");
  if (!is_decay(beta1)) return Status(StatusCode::kInvalidArgument, "beta1 must be in [0, 1)");
  if (!is_decay(beta2)) return Status(StatusCode::kInvalidArgument, "beta2 must be in [0, 1)");
  if (!is_decay(beta)) return Status(StatusCode::kInvalidArgument, "beta must be in [0, 1)");
  if (state_dtype != DType::kFloat32 && state_dtype != DType::kBFloat16) {
    return Status(StatusCode::kInvalidArgument, std::string("compensator state dtype must be float32 or bfloat16, got ") +
                                                    dtype_name(state_dtype));
  }
  if (!(clip >= 0.0f) || !std::isfinite(clip)) {
    return Status(StatusCode::kInvalidArgument, "compensator clip must be finite and >= 0, got " + float_text(clip));
  }
  if (units != CompensatorUnits::kStream && profile != CompensatorProfile::kFlat) {
    return Status(StatusCode::kInvalidArgument, std::string("compensator profile '") + compensator_profile_name(profile) +
                                                    "' acts in compensator units 'stream' only (the units are 'site'): "
                                                    "use profile 'flat', or units 'stream'");
  }
  if (units != CompensatorUnits::kStream && clip != 0.0f) {
    return Status(StatusCode::kInvalidArgument, "compensator clip " + float_text(clip) +
                                                    " acts in compensator units 'stream' only (the units are 'site'): "
                                                    "use clip 0, or units 'stream'");
  }
  if (units != CompensatorUnits::kStream && gains != CompensatorGains::kOwn) {
    return Status(StatusCode::kInvalidArgument, std::string("compensator gains '") + compensator_gains_name(gains) +
                                                    "' act in compensator units 'stream' only (the units are 'site'): "
                                                    "use gains 'own', or units 'stream'");
  }
  if (mode == CompensatorMode::kDeficit &&
      (units != CompensatorUnits::kStream || residual != ResidualMode::kLocal || gains != CompensatorGains::kSum ||
       profile != CompensatorProfile::kFlat)) {
    return Status(StatusCode::kInvalidArgument,
                  std::string("compensator 'deficit' runs with units 'stream', residual 'local', gains 'sum' and "
                              "profile 'flat' (docs/numerics.md 6.2); got units '") +
                      compensator_units_name(units) + "', residual '" + residual_mode_name(residual) + "', gains '" +
                      compensator_gains_name(gains) + "', profile '" + compensator_profile_name(profile) + "'");
  }
  return Status::Ok();
}

void compensator_apply(const CompensatorSpec& spec, const CompensatorState& state, const float* x,
                       std::size_t count, float* x_prime) {
  const bool active = spec.mode != CompensatorMode::kOff && state.m1.size() == count;
  if (!active) {
    for (std::size_t i = 0; i < count; ++i) x_prime[i] = canonical_nan(x[i]);
    return;
  }
  const float eta = spec.eta;
  const float* m1 = state.m1.data();
  if (spec.mode == CompensatorMode::kSingle || spec.mode == CompensatorMode::kDeficit) {
    // deficit_correction and single_correction are the same product, fp32(eta * m1).
#pragma omp parallel for simd schedule(static) if (count >= (1u << 16))
    for (std::size_t i = 0; i < count; ++i) {
      const float c = numerics::single_correction(eta, m1[i]);
      x_prime[i] = canonical_nan(numerics::compensate(x[i], c));
    }
    return;
  }
  const float a = spec.a;
  const float oa = numerics::one_minus(a);
  const float* m2 = state.m2.data();
#pragma omp parallel for simd schedule(static) if (count >= (1u << 16))
  for (std::size_t i = 0; i < count; ++i) {
    const float c = numerics::dual_correction(eta, a, oa, m1[i], m2[i]);
    x_prime[i] = canonical_nan(numerics::compensate(x[i], c));
  }
}

namespace {

// m = fp32(fp32(beta * m) + fp32((1 - beta) * u)), stored in the state dtype (a NaN as the
// canonical one).
void ema_update(std::vector<float>& m, float beta, const float* u, std::size_t count, DType state_dtype) {
  const float ob = numerics::one_minus(beta);
  const bool bf16 = state_dtype == DType::kBFloat16;
  float* p = m.data();
#pragma omp parallel for simd schedule(static) if (count >= (1u << 16))
  for (std::size_t i = 0; i < count; ++i) {
    p[i] = numerics::round_state(numerics::ema_step(beta, p[i], ob, u[i]), bf16);
  }
}

// Mode 'deficit' without a post-norm (numerics 6.2): A = S(fp32(A + fp32(u - fp32(eta * A)))), the
// correction recomputed from the same A the apply read.
void deficit_update(std::vector<float>& m, float eta, const float* u, std::size_t count, DType state_dtype) {
  const bool bf16 = state_dtype == DType::kBFloat16;
  float* p = m.data();
#pragma omp parallel for simd schedule(static) if (count >= (1u << 16))
  for (std::size_t i = 0; i < count; ++i) {
    const float d = numerics::undelivered(u[i], numerics::deficit_correction(eta, p[i]));
    p[i] = numerics::round_state(numerics::deficit_step(p[i], d), bf16);
  }
}

}  // namespace

void compensator_update(const CompensatorSpec& spec, CompensatorState& state, const float* residual,
                        std::size_t count) {
  if (spec.mode == CompensatorMode::kOff) return;
  if (state.m1.size() != count) state.m1.assign(count, 0.0f);
  if (spec.mode == CompensatorMode::kDeficit) {
    deficit_update(state.m1, spec.eta, residual, count, spec.state_dtype);
    return;
  }
  if (spec.mode == CompensatorMode::kSingle) {
    ema_update(state.m1, spec.beta, residual, count, spec.state_dtype);
    return;
  }
  if (state.m2.size() != count) state.m2.assign(count, 0.0f);
  ema_update(state.m1, spec.beta1, residual, count, spec.state_dtype);
  ema_update(state.m2, spec.beta2, residual, count, spec.state_dtype);
}

}  // namespace echo
