// Backward mode (paper Sec. 5.4, docs/numerics.md 5): the one-scalar max all-reduce. Each rank
// reduces max |x'| over its whole message, then the last block publishes it to every peer as one
// 64-bit word (epoch in the high half, the float bits in the low half), which the quantizing
// kernels of the same call read to form the shared exponent k.
#include "device/block_max.cuh"
#include "kernel_args.h"
#include "device/lane_ops.cuh"
#include "launch.h"

namespace echo::cuda {
namespace {

using namespace device;

constexpr int kMaxLane = 8;

template <DType D>
__global__ void __launch_bounds__(kBlockThreads, kAuxBlocksPerSm) backward_max_kernel(CallArgs a) {
  constexpr int E = kMaxLane;
  __shared__ unsigned warp_max[kWarpsPerBlock];
  const unsigned long long epoch = a.control->seq + 1;  // the call's epoch; not advanced here
  const bool fresh = a.comp.mode != CompensatorMode::kOff && *a.comp.fresh != 0;
  const bool aligned = (reinterpret_cast<std::uintptr_t>(a.in) & 15u) == 0;
  unsigned best = 0;  // |x'| as bits: non-negative floats order like unsigned integers
  const std::size_t lanes = (a.count + E - 1) / E;
  for (std::size_t l = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; l < lanes;
       l += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t e0 = l * E;
    const int valid = a.count - e0 < static_cast<std::size_t>(E) ? static_cast<int>(a.count - e0) : E;
    float x[E], m1[E], m2[E];
    load_elems<D, E>(a.in, e0, valid, aligned, x);
    load_state<E>(a.comp, e0, valid, m1, m2);
    apply_compensation<E>(a.comp, fresh, m1, m2, x);
#pragma unroll
    for (int k = 0; k < E; ++k) {
      if (k < valid) {
        const unsigned b = abs_bits_for_max(x[k]);
        best = b > best ? b : best;
      }
    }
  }
  best = block_max_to_thread0<kWarpsPerBlock>(best, warp_max);
  if (threadIdx.x == 0) {
    atomicMax(&a.control->max_bits, best);
    __threadfence();  // the max before the done count, so the last block sees every block's max
    const unsigned prev = atomicAdd(&a.control->max_done_blocks, 1u);
    if (prev == gridDim.x - 1) {
      const unsigned m = atomicExch(&a.control->max_bits, 0u);
      a.control->max_done_blocks = 0;
      const unsigned long long word = (epoch << 32) | m;
      // NCCL transport: the own word only; the host's ncclAllGather delivers it.
      for (int r = a.nccl ? a.rank : 0; r < (a.nccl ? a.rank + 1 : a.ranks); ++r) {
        auto* words = reinterpret_cast<unsigned long long*>(a.peer_base[r] + a.layout.scale_words_offset);
        store_release_sys(words + a.rank, word);
      }
    }
  }
}

}  // namespace

cudaError_t backward_max_preload() {
  return load_kernels({reinterpret_cast<const void*>(backward_max_kernel<DType::kFloat32>),
                       reinterpret_cast<const void*>(backward_max_kernel<DType::kBFloat16>),
                       reinterpret_cast<const void*>(backward_max_kernel<DType::kFloat16>)});
}

cudaError_t backward_max(const CallArgs& a, int grid, cudaStream_t stream) {
  switch (a.dtype) {
    case DType::kFloat32: backward_max_kernel<DType::kFloat32><<<grid, kBlockThreads, 0, stream>>>(a); break;
    case DType::kBFloat16: backward_max_kernel<DType::kBFloat16><<<grid, kBlockThreads, 0, stream>>>(a); break;
    case DType::kFloat16: backward_max_kernel<DType::kFloat16><<<grid, kBlockThreads, 0, stream>>>(a); break;
  }
  return cudaGetLastError();
}

}  // namespace echo::cuda
