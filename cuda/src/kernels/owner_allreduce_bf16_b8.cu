// Owner kernel variants of bf16 at 8 bits: the default instances and the fused options one for calls
// with the rotation (one translation unit per dtype, bit width and instance set keeps parallel
// builds short; owner_dispatch.cpp picks the unit).
#include "owner_allreduce.cuh"

namespace echo::cuda {

ECHO_OWNER_UNIT(bf16_b8, DType::kBFloat16, 8, kNoOptions)

}  // namespace echo::cuda
