// The one-GPU emulation's launchers (emulate_args.h): the backward max |x'| kernel and the dispatch
// of the main kernels (emulate/allreduce.cuh, one translation unit per dtype).
#include "emulate_args.h"
#include "device/block_max.cuh"
#include "kernels/emulate/lanes.cuh"

namespace echo::cuda {
namespace {

using namespace device;

constexpr int E = kEmulateLane;
constexpr int kChunk = kBlockThreads * E;
// The max kernel only streams: a few waves of blocks suffice.
constexpr std::size_t kMaxGridCap = 4096;

// Backward calls (docs/numerics.md 5): max |x'| over every rank's whole message, a non-finite
// value counting as +Inf (k = 0). Non-negative floats order like their bits.
template <DType D>
__global__ void __launch_bounds__(kBlockThreads) emulate_backward_max_kernel(EmulateParams a) {
  __shared__ unsigned warp_max[kWarpsPerBlock];
  const bool fresh = a.comp.mode != CompensatorMode::kOff && *a.comp.fresh != 0;
  unsigned best = 0;
  const std::size_t chunks = (a.count + kChunk - 1) / kChunk;
  for (std::size_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
    const std::size_t e0 = chunk * kChunk + static_cast<std::size_t>(threadIdx.x) * E;
    if (e0 >= a.count) continue;
    const int valid = a.count - e0 < static_cast<std::size_t>(E) ? static_cast<int>(a.count - e0) : E;
    for (int r = 0; r < a.ranks; ++r) {
      const void* row = static_cast<const typename Elem<D>::T*>(a.parts) + static_cast<std::size_t>(r) * a.count;
      float x[E], m1[E], m2[E];
      load_lane<D>(row, e0, valid, lane_aligned<D, E>(row), x);
      if (a.comp.mode != CompensatorMode::kOff) {
        load_state<E>(a.comp, static_cast<std::size_t>(r) * a.state_stride + e0, valid, m1, m2);
        apply_compensation<E>(a.comp, fresh, m1, m2, x);
      }
#pragma unroll
      for (int k = 0; k < E; ++k) {
        if (k < valid) {
          const unsigned b = abs_bits_for_max(x[k]);
          best = b > best ? b : best;
        }
      }
    }
  }
  best = block_max_to_thread0<kWarpsPerBlock>(best, warp_max);
  if (threadIdx.x == 0 && best != 0) atomicMax(&a.report->max_abs_bits, best);
}

}  // namespace

cudaError_t emulate_backward_max(DType dtype, const EmulateParams& p, cudaStream_t stream) {
  const std::size_t chunks = (p.count + kChunk - 1) / kChunk;
  const auto grid = static_cast<unsigned>(chunks < kMaxGridCap ? chunks : kMaxGridCap);
  switch (dtype) {
    case DType::kFloat32: emulate_backward_max_kernel<DType::kFloat32><<<grid, kBlockThreads, 0, stream>>>(p); break;
    case DType::kBFloat16: emulate_backward_max_kernel<DType::kBFloat16><<<grid, kBlockThreads, 0, stream>>>(p); break;
    case DType::kFloat16: emulate_backward_max_kernel<DType::kFloat16><<<grid, kBlockThreads, 0, stream>>>(p); break;
  }
  return cudaGetLastError();
}

cudaError_t emulate_main(DType dtype, bool exact, const EmulateParams& p, cudaStream_t stream) {
  switch (dtype) {
    case DType::kFloat32: return emulate_launch<DType::kFloat32>(exact, p, stream);
    case DType::kBFloat16: return emulate_launch<DType::kBFloat16>(exact, p, stream);
    case DType::kFloat16: return emulate_launch<DType::kFloat16>(exact, p, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace echo::cuda
