// Owner kernel variants of one dtype and bit width (one translation unit each keeps parallel builds
// short; owner_dispatch.cpp picks the bit width).
#include "owner_allreduce.cuh"

namespace echo::cuda {

cudaError_t owner_allreduce_bf16_b8(const CallArgs& a, bool last_round, int grid, cudaStream_t stream) {
  return owner_detail::launch_dtype_bits<DType::kBFloat16, 8>(a, last_round, grid, stream);
}

int owner_blocks_per_sm_bf16_b8(int group, Compensation comp) {
  return owner_detail::blocks_per_sm_dtype_bits<DType::kBFloat16, 8>(group, comp);
}

cudaError_t owner_preload_bf16_b8() { return owner_detail::preload_dtype_bits<DType::kBFloat16, 8>(); }

}  // namespace echo::cuda
