// The owner kernel's per-dtype entry points (called by owner_allreduce.cu): each picks the half of
// its dtype compiled for the call's bit width (owner_allreduce_<dtype>_b<bits>.cu, one translation
// unit per dtype and bit width so that no single one is the long pole of a parallel build).
#include "launch.h"

namespace echo::cuda {

// One dtype's entry points over its two units (ECHO_OWNER_UNIT in owner/launch_variants.cuh). A bit
// width without variants is refused by the launch and has one resident block, as a shape without
// one does; preload loads the 4-bit kernels, then the 8-bit ones.
#define ECHO_OWNER_DTYPE(NAME)                                                                      \
  cudaError_t owner_allreduce_##NAME##_b4(const CallArgs& a, bool last_round, int grid, cudaStream_t stream); \
  cudaError_t owner_allreduce_##NAME##_b8(const CallArgs& a, bool last_round, int grid, cudaStream_t stream); \
  int owner_blocks_per_sm_##NAME##_b4(int group, Compensation comp);                               \
  int owner_blocks_per_sm_##NAME##_b8(int group, Compensation comp);                               \
  cudaError_t owner_preload_##NAME##_b4();                                                          \
  cudaError_t owner_preload_##NAME##_b8();                                                          \
                                                                                                    \
  cudaError_t owner_allreduce_##NAME(const CallArgs& a, bool last_round, int grid, cudaStream_t stream) { \
    if (a.bits == 4) return owner_allreduce_##NAME##_b4(a, last_round, grid, stream);              \
    if (a.bits == 8) return owner_allreduce_##NAME##_b8(a, last_round, grid, stream);              \
    return cudaErrorInvalidValue;                                                                   \
  }                                                                                                 \
  int owner_blocks_per_sm_##NAME(int bits, int group, Compensation comp) {                          \
    if (bits == 4) return owner_blocks_per_sm_##NAME##_b4(group, comp);                            \
    if (bits == 8) return owner_blocks_per_sm_##NAME##_b8(group, comp);                            \
    return 1;                                                                                       \
  }                                                                                                 \
  cudaError_t owner_preload_##NAME() {                                                              \
    const cudaError_t e = owner_preload_##NAME##_b4();                                              \
    return e == cudaSuccess ? owner_preload_##NAME##_b8() : e;                                      \
  }

ECHO_OWNER_DTYPE(f32)
ECHO_OWNER_DTYPE(bf16)
ECHO_OWNER_DTYPE(f16)

#undef ECHO_OWNER_DTYPE

}  // namespace echo::cuda
