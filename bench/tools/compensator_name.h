// The compensator names the CUDA tools take on their command line (echo_cuda_stage_probe,
// echo_cuda_job_trace): off; dual (the dual compensator, local residual, fp32 state); dual-bf16
// (the same with bf16 state); global (dual, global residual); global-bf16.
#pragma once

#include <string>

#include "echo/compensator.h"
#include "echo/dtype.h"

namespace echo::cuda::tools {

inline constexpr const char* kCompensatorNames = "off, dual, dual-bf16, global, global-bf16";

// Sets every field of *spec that the name decides (mode, residual, state type), whatever *spec
// held before (AllReduceSpec's default compensator is the dual one, so "off" has to say so);
// false for an unknown name, leaving *spec as it was.
inline bool compensator_from_name(const std::string& name, CompensatorSpec* spec) {
  CompensatorSpec s = *spec;
  s.state_dtype = DType::kFloat32;
  if (name == "off") {
    s.mode = CompensatorMode::kOff;
  } else if (name == "dual" || name == "dual-bf16") {
    s.mode = CompensatorMode::kDual;
    s.residual = ResidualMode::kLocal;
  } else if (name == "global" || name == "global-bf16") {
    s.mode = CompensatorMode::kDual;
    s.residual = ResidualMode::kGlobal;
  } else {
    return false;
  }
  if (name == "dual-bf16" || name == "global-bf16") s.state_dtype = DType::kBFloat16;
  *spec = s;
  return true;
}

}  // namespace echo::cuda::tools
