// The CUDA library as a replay backend (built when cuda/ is).
#pragma once

#include <memory>

#include "echo/backend.h"

namespace echo::cli {

Status make_cuda_backend(const AllReduceSpec& spec, int ranks,
                         std::unique_ptr<AllReduceBackend>* backend);

}  // namespace echo::cli
