// The #wrong column against the CPU reference (as nccl-tests counts a result against an expected
// one): the reference computes what every rank must receive from the same inputs, bit for bit
// (docs/numerics.md), and each rank's output is compared with it. Plain C++: no GPU needed.
#pragma once

#include <cstdint>
#include <vector>

#include "echo/allreduce.h"
#include "echo/status.h"

namespace echo::bench {

// The bf16 bits every rank must hold after `calls` calls of `spec` on `inputs` (one bf16 vector
// per rank, all of one length), the compensator (if any) starting reset and carried from call to
// call as the device's is.
Status reference_result(const AllReduceSpec& spec, const std::vector<std::vector<std::uint16_t>>& inputs, int calls,
                        std::vector<std::uint16_t>* expected);

// The elements, summed over the ranks, in which a rank's output differs from `expected`.
unsigned long long count_wrong(const std::vector<std::uint16_t>& expected,
                               const std::vector<std::vector<std::uint16_t>>& outputs);

}  // namespace echo::bench
