// Owner kernel instances of f32 at 8 bits for calls with wide groups and no rotation
// (owner_runs_wide_only in launch.h): the default instances compiled with overflow-groups wide
// (docs/numerics.md 2.4). One unit per dtype, bit width and instance set, as docs/architecture.md
// says why (a parallel build's long pole).
#include "owner_allreduce.cuh"

namespace echo::cuda {

template OwnerUnit owner_unit<DType::kFloat32, 8, kOptionWide>();

}  // namespace echo::cuda
