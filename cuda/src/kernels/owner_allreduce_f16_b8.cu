// Owner kernel variants of f16 at 8 bits (one translation unit per dtype and bit width keeps
// parallel builds short; owner_dispatch.cpp picks the bit width).
#include "owner_allreduce.cuh"

namespace echo::cuda {

ECHO_OWNER_UNIT(f16, DType::kFloat16, 8)

}  // namespace echo::cuda
