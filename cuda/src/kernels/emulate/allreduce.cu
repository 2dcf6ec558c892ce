// The one-GPU emulation's launchers (emulate_args.h): the backward max |x'| kernel, the stream
// units' row gains and the dispatch of the main kernels (emulate/allreduce.cuh, one translation
// unit per dtype).
#include "emulate_args.h"
#include "device/block_max.cuh"
#include "echo/numerics/stream_units.h"
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

// Compensator units 'stream' (docs/numerics.md 6.1 steps 1-3): one warp per rank and row. Lane l
// sums the squares of the row's dtype(x) at l, l + 32, ... in turn, the xor butterfly leaves the
// row's sum of squares q on every lane, and lane 0 stores the gains of rho = sqrt(q / H), and with a
// clip the row's bound (step 7). With profile 'sqrt' the grid's threads first form the site's
// factors f_j (step 6), one feature each.
template <DType D>
__global__ void __launch_bounds__(kBlockThreads) emulate_stream_gains_kernel(EmulateParams a) {
  static_assert(numerics::kRowLanes == 32, "a row's lane sums are a warp's lanes");
  using T = typename Elem<D>::T;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const std::size_t rows = static_cast<std::size_t>(a.ranks) * a.stream_rows;
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * kWarpsPerBlock;
  const float n = static_cast<float>(a.row_length);
  if (a.profile_factors != nullptr) {
    const std::size_t threads = static_cast<std::size_t>(gridDim.x) * kBlockThreads;
    for (std::size_t j = static_cast<std::size_t>(blockIdx.x) * kBlockThreads + threadIdx.x; j < a.row_length;
         j += threads) {
      a.profile_factors[j] = numerics::profile_factor(a.weights[j], a.weight_rms);
    }
  }
  // w is uniform over the warp: every lane runs the butterfly's shuffles.
  for (std::size_t w = static_cast<std::size_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; w < rows; w += warps) {
    const std::size_t r = w / a.stream_rows;
    const T* row = static_cast<const T*>(a.parts) + r * a.count + (w - r * a.stream_rows) * a.row_length;
    float s = 0.0f;
    for (std::size_t j = static_cast<std::size_t>(lane); j < a.row_length; j += numerics::kRowLanes) {
      s = numerics::add_square(s, Elem<D>::load(row[j]));
    }
#pragma unroll
    for (int offset = numerics::kRowLanes / 2; offset >= 1; offset /= 2) {
      s = numerics::add_lanes(s, __shfl_xor_sync(0xFFFFFFFFu, s, offset));
    }
    if (lane == 0) {
      const float rho = numerics::row_rms(s, n);
      a.stream_gains[w] = numerics::stream_gains(a.weight_rms, rho);
      if (a.clip_bounds != nullptr) a.clip_bounds[w] = numerics::clip_bound(a.clip, rho);
    }
  }
}

}  // namespace

cudaError_t emulate_stream_gains(DType dtype, const EmulateParams& p, cudaStream_t stream) {
  const std::size_t warps = static_cast<std::size_t>(p.ranks) * p.stream_rows;
  const std::size_t blocks = (warps + kWarpsPerBlock - 1) / kWarpsPerBlock;
  const auto grid = static_cast<unsigned>(blocks < kMaxGridCap ? (blocks < 1 ? 1 : blocks) : kMaxGridCap);
  switch (dtype) {
    case DType::kFloat32: emulate_stream_gains_kernel<DType::kFloat32><<<grid, kBlockThreads, 0, stream>>>(p); break;
    case DType::kBFloat16: emulate_stream_gains_kernel<DType::kBFloat16><<<grid, kBlockThreads, 0, stream>>>(p); break;
    case DType::kFloat16: emulate_stream_gains_kernel<DType::kFloat16><<<grid, kBlockThreads, 0, stream>>>(p); break;
  }
  return cudaGetLastError();
}

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
