// Owner kernel instances of f32 at 8 bits: the default ones (calls with overflow-groups poison)
// and the fused options one for calls with the rotation. One unit per dtype, bit width and
// instance set, as docs/architecture.md says why (a parallel build's long pole).
#include "owner_allreduce.cuh"

namespace echo::cuda {

template OwnerUnit owner_unit<DType::kFloat32, 8, kNoOptions>();

}  // namespace echo::cuda
