// The CUDA library as replay backends (built when cuda/ is; `cuda` only with the peer-to-peer
// kernels, ECHO_CUDA_PEER_TO_PEER): `cuda`, the peer-to-peer collective
// of P ranks over the GPUs present (cuda_backend.cpp), and `emulate`, the one-GPU emulation of P
// ranks (emulate_backend.cpp), which also runs the calls that need their site.
#pragma once

#include <memory>

#include "echo/backend.h"

namespace echo::cli {

Status make_cuda_backend(const AllReduceSpec& spec, int ranks,
                         std::unique_ptr<AllReduceBackend>* backend);
Status make_emulate_backend(const AllReduceSpec& spec, int ranks, std::unique_ptr<AllReduceBackend>* backend);

}  // namespace echo::cli
