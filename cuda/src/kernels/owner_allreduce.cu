// Host launcher of the owner all-reduce kernel (owner_allreduce.cuh): picks the dtype's variants
// (owner_dispatch.cpp then picks the bit width's).
#include "launch.h"

namespace echo::cuda {

cudaError_t owner_allreduce_f32(const CallArgs& a, bool last_round, int grid, cudaStream_t stream);
cudaError_t owner_allreduce_bf16(const CallArgs& a, bool last_round, int grid, cudaStream_t stream);
cudaError_t owner_allreduce_f16(const CallArgs& a, bool last_round, int grid, cudaStream_t stream);
int owner_blocks_per_sm_f32(int bits, int group, Compensation comp);
int owner_blocks_per_sm_bf16(int bits, int group, Compensation comp);
int owner_blocks_per_sm_f16(int bits, int group, Compensation comp);

cudaError_t owner_preload_f32();
cudaError_t owner_preload_bf16();
cudaError_t owner_preload_f16();

cudaError_t owner_allreduce_preload() {
  cudaError_t e = owner_preload_f32();
  if (e == cudaSuccess) e = owner_preload_bf16();
  if (e == cudaSuccess) e = owner_preload_f16();
  return e;
}

int lane_elements(int bits, int group, Compensation comp) {
  // Without the compensator, 32 elements per lane halve the per-lane work of push and reduce
  // (addressing, group map, parameter decode, loop control) against 16, at two resident blocks per
  // multiprocessor either way (measured on 2 x H200, 1 GiB: push 359 -> 301 us, reduce 733 -> 624
  // us, Echo 4-bit 1.70 -> 1.53 ms; docs/performance.md, "Lanes and resident blocks per variant").
  // A group of 16 elements fits 16-element lanes only. The tail runs on 16-element lanes in every
  // variant (owner_allreduce.cuh).
  // With the compensator its state occupies registers as well. Local residual: 8 elements per
  // lane (groups up to 256) keep three blocks resident to hide the state's loads and the peer
  // stores (1 GiB call: 4.48 ms against 4.61 on 16-element lanes at two blocks). Global residual
  // (no state update in push and reduce): 16 elements per lane (5.89 against 6.31 ms on 8).
  // Groups above 256 (local) or 512 elements need 16 or 32 to fit in one warp.
  (void)bits;
  if (comp == Compensation::kOff) return group >= 32 ? 32 : 16;
  if (comp == Compensation::kLocal && group <= 256) return 8;
  return group / 16 > 32 ? 32 : 16;
}

int owner_allreduce_blocks_per_sm(DType dtype, int bits, int group, Compensation comp) {
  switch (dtype) {
    case DType::kFloat32: return owner_blocks_per_sm_f32(bits, group, comp);
    case DType::kBFloat16: return owner_blocks_per_sm_bf16(bits, group, comp);
    case DType::kFloat16: return owner_blocks_per_sm_f16(bits, group, comp);
  }
  return 1;
}

cudaError_t owner_allreduce(const CallArgs& a, bool last_round, int grid, cudaStream_t stream) {
  switch (a.dtype) {
    case DType::kFloat32: return owner_allreduce_f32(a, last_round, grid, stream);
    case DType::kBFloat16: return owner_allreduce_bf16(a, last_round, grid, stream);
    case DType::kFloat16: return owner_allreduce_f16(a, last_round, grid, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace echo::cuda
