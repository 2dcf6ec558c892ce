// Owner kernel variants for one dtype (one translation unit per dtype keeps builds parallel).
#include "owner_allreduce.cuh"

namespace echo::cuda {

cudaError_t owner_allreduce_f16(const CallArgs& a, bool last_round, int grid, cudaStream_t stream) {
  return owner_detail::launch_dtype<DType::kFloat16>(a, last_round, grid, stream);
}

int owner_blocks_per_sm_f16(int bits, int group, Compensation comp) {
  return owner_detail::blocks_per_sm_dtype<DType::kFloat16>(bits, group, comp);
}

cudaError_t owner_preload_f16() { return owner_detail::preload_dtype<DType::kFloat16>(); }

}  // namespace echo::cuda
