// The CUDA path's capabilities (echo/cuda/can_implement.h); no CUDA needed to build it.
#include "echo/cuda/can_implement.h"

#include <string>

#include "echo/site.h"

namespace echo::cuda {

Status can_implement(const AllReduceSpec& spec, int ranks) {
  ECHO_TRY(spec.validate(ranks));
  if (spec.quant.bits != 4 && spec.quant.bits != 8) {
    return Status(StatusCode::kUnsupported,
                  "the CUDA path implements bits 4 and 8, got " + std::to_string(spec.quant.bits));
  }
  // Before the units: a backward call needs no site, and the kernels have no deficit update either.
  if (spec.compensator.mode == CompensatorMode::kDeficit) {
    return Status(StatusCode::kUnsupported,
                  "the CUDA path implements compensator 'deficit' (docs/numerics.md 6.2) only in the one-GPU "
                  "emulation (echo/cuda/emulate.h), not in its peer-to-peer kernels (forward or backward); the CPU "
                  "reference runs it too");
  }
  if (needs_site(spec)) {
    return Status(StatusCode::kUnsupported,
                  "the CUDA path implements compensator units 'site' only in its peer-to-peer kernels (units "
                  "'stream', docs/numerics.md 6.1, run in the CPU reference and the one-GPU emulation, "
                  "echo/cuda/emulate.h)");
  }
  if (spec.algorithm != Algorithm::kOwner) {
    return Status(StatusCode::kUnsupported, std::string("the CUDA path implements the owner algorithm only, got ") +
                                                algorithm_name(spec.algorithm));
  }
  return can_implement_transport(spec.quant);
}

Status can_implement_transport(const QuantSpec& q) {
  // The transport options of docs/numerics.md 2.4-2.6 are specified and implemented in the CPU
  // reference; the peer-to-peer kernels and the one-GPU emulation (echo/cuda/emulate.h) implement
  // both overflow modes (poisoned or wide groups, 2.4) and both rotations (2.6), not outliers sent
  // exactly (2.5).
  if (q.outliers != 0) {
    return Status(StatusCode::kUnsupported,
                  "the CUDA path implements outliers 0 only (outliers sent exactly are CPU reference "
                  "only), got " + std::to_string(q.outliers));
  }
  return Status::Ok();
}

}  // namespace echo::cuda
