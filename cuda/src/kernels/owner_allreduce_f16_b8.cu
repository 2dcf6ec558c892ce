// Owner kernel variants of f16 at 8 bits: the default instances and the fused options one for calls
// with the rotation (one translation unit per dtype, bit width and instance set keeps parallel
// builds short; owner_dispatch.cpp picks the unit).
#include "owner_allreduce.cuh"

namespace echo::cuda {

ECHO_OWNER_UNIT(f16_b8, DType::kFloat16, 8, kNoOptions)

}  // namespace echo::cuda
