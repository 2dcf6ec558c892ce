// Owner kernel instances of bf16 at 4 bits: the default ones (calls with overflow-groups poison)
// and the fused options one for calls with the rotation. One unit per dtype, bit width and
// instance set, as docs/architecture.md says why (a parallel build's long pole).
#include "owner_allreduce.cuh"

namespace echo::cuda {

template OwnerUnit owner_unit<DType::kBFloat16, 4, kNoOptions>();

}  // namespace echo::cuda
