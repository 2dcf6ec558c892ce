// The owner kernel's per-dtype entry points (called by owner_allreduce.cu): each picks the half of
// its dtype compiled for the call's bit width (owner_allreduce_<dtype>_b<bits>.cu, one translation
// unit per dtype and bit width so that no single one is the long pole of a parallel build).
#include "launch.h"

namespace echo::cuda {

cudaError_t owner_allreduce_f32_b4(const CallArgs& a, bool last_round, int grid, cudaStream_t stream);
cudaError_t owner_allreduce_f32_b8(const CallArgs& a, bool last_round, int grid, cudaStream_t stream);
cudaError_t owner_allreduce_bf16_b4(const CallArgs& a, bool last_round, int grid, cudaStream_t stream);
cudaError_t owner_allreduce_bf16_b8(const CallArgs& a, bool last_round, int grid, cudaStream_t stream);
cudaError_t owner_allreduce_f16_b4(const CallArgs& a, bool last_round, int grid, cudaStream_t stream);
cudaError_t owner_allreduce_f16_b8(const CallArgs& a, bool last_round, int grid, cudaStream_t stream);
int owner_blocks_per_sm_f32_b4(int group, Compensation comp);
int owner_blocks_per_sm_f32_b8(int group, Compensation comp);
int owner_blocks_per_sm_bf16_b4(int group, Compensation comp);
int owner_blocks_per_sm_bf16_b8(int group, Compensation comp);
int owner_blocks_per_sm_f16_b4(int group, Compensation comp);
int owner_blocks_per_sm_f16_b8(int group, Compensation comp);
cudaError_t owner_preload_f32_b4();
cudaError_t owner_preload_f32_b8();
cudaError_t owner_preload_bf16_b4();
cudaError_t owner_preload_bf16_b8();
cudaError_t owner_preload_f16_b4();
cudaError_t owner_preload_f16_b8();

cudaError_t owner_allreduce_f32(const CallArgs& a, bool last_round, int grid, cudaStream_t stream) {
  if (a.bits == 4) return owner_allreduce_f32_b4(a, last_round, grid, stream);
  if (a.bits == 8) return owner_allreduce_f32_b8(a, last_round, grid, stream);
  return cudaErrorInvalidValue;
}

cudaError_t owner_allreduce_bf16(const CallArgs& a, bool last_round, int grid, cudaStream_t stream) {
  if (a.bits == 4) return owner_allreduce_bf16_b4(a, last_round, grid, stream);
  if (a.bits == 8) return owner_allreduce_bf16_b8(a, last_round, grid, stream);
  return cudaErrorInvalidValue;
}

cudaError_t owner_allreduce_f16(const CallArgs& a, bool last_round, int grid, cudaStream_t stream) {
  if (a.bits == 4) return owner_allreduce_f16_b4(a, last_round, grid, stream);
  if (a.bits == 8) return owner_allreduce_f16_b8(a, last_round, grid, stream);
  return cudaErrorInvalidValue;
}

// A bit width without variants has one resident block, as a shape without one does.
int owner_blocks_per_sm_f32(int bits, int group, Compensation comp) {
  if (bits == 4) return owner_blocks_per_sm_f32_b4(group, comp);
  if (bits == 8) return owner_blocks_per_sm_f32_b8(group, comp);
  return 1;
}

int owner_blocks_per_sm_bf16(int bits, int group, Compensation comp) {
  if (bits == 4) return owner_blocks_per_sm_bf16_b4(group, comp);
  if (bits == 8) return owner_blocks_per_sm_bf16_b8(group, comp);
  return 1;
}

int owner_blocks_per_sm_f16(int bits, int group, Compensation comp) {
  if (bits == 4) return owner_blocks_per_sm_f16_b4(group, comp);
  if (bits == 8) return owner_blocks_per_sm_f16_b8(group, comp);
  return 1;
}

cudaError_t owner_preload_f32() {
  const cudaError_t e = owner_preload_f32_b4();
  return e == cudaSuccess ? owner_preload_f32_b8() : e;
}

cudaError_t owner_preload_bf16() {
  const cudaError_t e = owner_preload_bf16_b4();
  return e == cudaSuccess ? owner_preload_bf16_b8() : e;
}

cudaError_t owner_preload_f16() {
  const cudaError_t e = owner_preload_f16_b4();
  return e == cudaSuccess ? owner_preload_f16_b8() : e;
}

}  // namespace echo::cuda
