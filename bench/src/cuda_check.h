// Checked CUDA calls for the benchmarks: a failure becomes a kDeviceError Status naming what was
// being done, returned up to the caller (the harness never exits or throws).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "echo/status.h"
#include "echo/status.h"

namespace echo::bench {

inline Status cuda_status(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return Status::Ok();
  (void)cudaGetLastError();  // clears a non-sticky error so the next call starts clean
  return Status(StatusCode::kDeviceError, what + ": " + cudaGetErrorString(e));
}

}  // namespace echo::bench

// Returns a kDeviceError Status naming `what` unless the CUDA call `expr` succeeded.
#define ECHO_BENCH_CUDA(expr, what) ECHO_TRY(::echo::bench::cuda_status((expr), (what)))
