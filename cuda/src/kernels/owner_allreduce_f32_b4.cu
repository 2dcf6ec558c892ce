// Owner kernel variants of f32 at 4 bits: the default instances and the fused options one for calls
// with the rotation (one translation unit per dtype, bit width and instance set keeps parallel
// builds short; owner_dispatch.cpp picks the unit).
#include "owner_allreduce.cuh"

namespace echo::cuda {

ECHO_OWNER_UNIT(f32_b4, DType::kFloat32, 4, kNoOptions)

}  // namespace echo::cuda
