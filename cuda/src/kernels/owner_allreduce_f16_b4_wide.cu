// Owner kernel variants of f16 at 4 bits for calls with wide groups and no rotation
// (owner_runs_wide_only in launch.h): the default instances compiled with overflow-groups wide
// (docs/numerics.md 2.4), in a unit of their own so that a parallel build compiles them beside the
// default ones.
#include "owner_allreduce.cuh"

namespace echo::cuda {

ECHO_OWNER_UNIT(f16_b4_wide, DType::kFloat16, 4, kOptionWide)

}  // namespace echo::cuda
