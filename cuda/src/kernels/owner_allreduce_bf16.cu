// Owner kernel variants for one dtype (one translation unit per dtype keeps builds parallel).
#include "owner_allreduce.cuh"

namespace echo::cuda {

cudaError_t owner_allreduce_bf16(const CallArgs& a, bool last_round, int grid, cudaStream_t stream) {
  return owner_detail::launch_dtype<DType::kBFloat16>(a, last_round, grid, stream);
}

int owner_blocks_per_sm_bf16(int bits, int group, Compensation comp) {
  return owner_detail::blocks_per_sm_dtype<DType::kBFloat16>(bits, group, comp);
}

cudaError_t owner_preload_bf16() { return owner_detail::preload_dtype<DType::kBFloat16>(); }

}  // namespace echo::cuda
