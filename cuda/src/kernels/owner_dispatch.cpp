// The owner kernel's per-dtype entry points (called by owner_allreduce.cu): each picks the unit of
// its dtype compiled for the call's bit width and instance set (owner_allreduce_<dtype>_b<bits>.cu,
// and owner_allreduce_<dtype>_b<bits>_wide.cu for wide groups without the rotation:
// owner_runs_wide_only; one translation unit per dtype, bit width and set so that no single one is
// the long pole of a parallel build).
#include <algorithm>

#include "launch.h"

namespace echo::cuda {

// One dtype's entry points over its four units (ECHO_OWNER_UNIT in owner/launch_variants.cuh). A
// bit width without variants is refused by the launch and has one resident block, as a shape
// without one does; the resident blocks are the fewest of both sets' kernels, so that a grid sized
// by them fits either set; preload loads the 4-bit kernels, then the 8-bit ones, then the wide ones.
#define ECHO_OWNER_UNIT_DECL(UNIT)                                                                  \
  cudaError_t owner_allreduce_##UNIT(const CallArgs& a, bool last_round, int grid, cudaStream_t stream); \
  int owner_blocks_per_sm_##UNIT(int group, Compensation comp);                                     \
  cudaError_t owner_preload_##UNIT();
#define ECHO_OWNER_DTYPE(NAME)                                                                      \
  ECHO_OWNER_UNIT_DECL(NAME##_b4)                                                                   \
  ECHO_OWNER_UNIT_DECL(NAME##_b8)                                                                   \
  ECHO_OWNER_UNIT_DECL(NAME##_b4_wide)                                                              \
  ECHO_OWNER_UNIT_DECL(NAME##_b8_wide)                                                              \
                                                                                                    \
  cudaError_t owner_allreduce_##NAME(const CallArgs& a, bool last_round, int grid, cudaStream_t stream) { \
    const bool wide = owner_runs_wide_only(a);                                                      \
    if (a.bits == 4) {                                                                              \
      return wide ? owner_allreduce_##NAME##_b4_wide(a, last_round, grid, stream)                   \
                  : owner_allreduce_##NAME##_b4(a, last_round, grid, stream);                       \
    }                                                                                               \
    if (a.bits == 8) {                                                                              \
      return wide ? owner_allreduce_##NAME##_b8_wide(a, last_round, grid, stream)                   \
                  : owner_allreduce_##NAME##_b8(a, last_round, grid, stream);                       \
    }                                                                                               \
    return cudaErrorInvalidValue;                                                                   \
  }                                                                                                 \
  int owner_blocks_per_sm_##NAME(int bits, int group, Compensation comp) {                          \
    if (bits == 4) {                                                                                \
      return std::min(owner_blocks_per_sm_##NAME##_b4(group, comp), owner_blocks_per_sm_##NAME##_b4_wide(group, comp)); \
    }                                                                                               \
    if (bits == 8) {                                                                                \
      return std::min(owner_blocks_per_sm_##NAME##_b8(group, comp), owner_blocks_per_sm_##NAME##_b8_wide(group, comp)); \
    }                                                                                               \
    return 1;                                                                                       \
  }                                                                                                 \
  cudaError_t owner_preload_##NAME() {                                                              \
    cudaError_t e = owner_preload_##NAME##_b4();                                                    \
    if (e == cudaSuccess) e = owner_preload_##NAME##_b8();                                          \
    if (e == cudaSuccess) e = owner_preload_##NAME##_b4_wide();                                     \
    if (e == cudaSuccess) e = owner_preload_##NAME##_b8_wide();                                     \
    return e;                                                                                       \
  }

ECHO_OWNER_DTYPE(f32)
ECHO_OWNER_DTYPE(bf16)
ECHO_OWNER_DTYPE(f16)

#undef ECHO_OWNER_DTYPE
#undef ECHO_OWNER_UNIT_DECL

}  // namespace echo::cuda
