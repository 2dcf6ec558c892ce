// Global residual mode, update step (paper Sec. 5.3): runs on the communicator's side stream after
// the all-reduce, beside the caller's next kernel. It recomputes x' = x + c from the stash of the
// input and the state, forms u = x' - y / P with y the delivered output, and refreshes m1, m2 in
// place. The next call's entry waits for it.
#include "kernel_args.h"
#include "device/lane_ops.cuh"
#include "launch.h"

namespace echo::cuda {
namespace {

using namespace device;

// Eight elements per lane and four resident blocks per multiprocessor: every lane has its six
// 16-byte loads (stash, output, two fp32 state words each; bf16 state: one each) in flight at once,
// and 32 warps per multiprocessor keep enough of them outstanding to stream at memory speed.
constexpr int kUpdateLane = 8;

template <DType D>
__global__ void __launch_bounds__(kBlockThreads, kAuxBlocksPerSm) compensator_update_kernel(CallArgs a) {
  constexpr int E = kUpdateLane;
  const bool fresh = *a.comp.fresh != 0;
  const bool out_aligned = (reinterpret_cast<std::uintptr_t>(a.out) & 15u) == 0;
  const float p = static_cast<float>(a.ranks);
  // y / P: for a power-of-two P the product with 1 / P is the same correctly rounded quotient
  // (numerics::global_residual_pow2), one multiplication instead of a division.
  const bool pow2 = (a.ranks & (a.ranks - 1)) == 0;
  const float inv_p = 1.0f / p;
  const std::size_t lanes = (a.count + E - 1) / E;
  for (std::size_t l = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; l < lanes;
       l += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t e0 = l * E;
    const int valid = a.count - e0 < static_cast<std::size_t>(E) ? static_cast<int>(a.count - e0) : E;
    float x[E], y[E], m1[E], m2[E];
    load_elems<D, E>(a.comp.stash, e0, valid, true, x);
    load_elems<D, E>(a.out, e0, valid, out_aligned, y);
    load_state<E>(a.comp, e0, valid, m1, m2);
    apply_compensation<E>(a.comp, fresh, m1, m2, x);
    float u[E];
#pragma unroll
    for (int k = 0; k < E; ++k) {
      u[k] = pow2 ? numerics::global_residual_pow2(x[k], y[k], inv_p) : numerics::global_residual(x[k], y[k], p);
    }
    update_state<E>(a.comp, u, m1, m2);
    store_state<E>(a.comp, e0, valid, m1, m2);
  }
}

}  // namespace

cudaError_t compensator_update_preload() {
  return load_kernels({reinterpret_cast<const void*>(compensator_update_kernel<DType::kFloat32>),
                       reinterpret_cast<const void*>(compensator_update_kernel<DType::kBFloat16>),
                       reinterpret_cast<const void*>(compensator_update_kernel<DType::kFloat16>)});
}

cudaError_t compensator_update(const CallArgs& a, int grid, cudaStream_t stream) {
  switch (a.dtype) {
    case DType::kFloat32: compensator_update_kernel<DType::kFloat32><<<grid, kBlockThreads, 0, stream>>>(a); break;
    case DType::kBFloat16: compensator_update_kernel<DType::kBFloat16><<<grid, kBlockThreads, 0, stream>>>(a); break;
    case DType::kFloat16: compensator_update_kernel<DType::kFloat16><<<grid, kBlockThreads, 0, stream>>>(a); break;
  }
  return cudaGetLastError();
}

}  // namespace echo::cuda
