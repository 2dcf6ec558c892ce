// Status-returning checks: a failed CUDA or NCCL call becomes a kDeviceError Status whose message
// names the call, file and line. The library never exits or throws across its API.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "echo/status.h"

namespace echo::cuda::detail {

inline Status cuda_status(cudaError_t err, const char* expr, const char* file, int line) {
  // Reading the error also clears a non-sticky error so the next call starts clean.
  (void)cudaGetLastError();
  return Status(StatusCode::kDeviceError, std::string(file) + ":" + std::to_string(line) + ": " +
                                              expr + " failed: " + cudaGetErrorString(err));
}

inline Status nccl_status(ncclResult_t res, const char* expr, const char* file, int line) {
  return Status(StatusCode::kDeviceError, std::string(file) + ":" + std::to_string(line) + ": " +
                                              expr + " failed: " + ncclGetErrorString(res));
}

}  // namespace echo::cuda::detail

#define ECHO_CUDA_CHECK(expr)                                                          \
  do {                                                                                 \
    const cudaError_t echo_err_ = (expr);                                              \
    if (echo_err_ != cudaSuccess) {                                                    \
      return ::echo::cuda::detail::cuda_status(echo_err_, #expr, __FILE__, __LINE__);  \
    }                                                                                  \
  } while (0)

#define ECHO_NCCL_CHECK(expr)                                                          \
  do {                                                                                 \
    const ncclResult_t echo_res_ = (expr);                                             \
    if (echo_res_ != ncclSuccess) {                                                    \
      return ::echo::cuda::detail::nccl_status(echo_res_, #expr, __FILE__, __LINE__);  \
    }                                                                                  \
  } while (0)
