// The emulation kernels for one dtype (emulate/allreduce.cuh), in a translation unit of their own so
// the three dtypes compile in parallel.
#include "kernels/emulate/allreduce.cuh"

namespace echo::cuda {
template cudaError_t emulate_launch<DType::kFloat32>(bool exact, const EmulateParams& p, cudaStream_t stream);
}  // namespace echo::cuda
