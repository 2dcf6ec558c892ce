// The one-GPU emulation's launchers (emulate_args.h): the backward max |x'| kernel, the stream
// units' row gains, gains 'sum''s update after delivery and the dispatch of the main kernels (emulate/allreduce.cuh, one translation
// unit per dtype).
#include "emulate_args.h"
#include "device/block_max.cuh"
#include "echo/numerics/deficit_loop.h"
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
        apply_compensation<E, true>(a.comp, fresh, m1, m2, x);
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

// Numerics 6.1 steps 1 and 2's sum of squares of one row of the dtype, by a warp: lane l sums the
// squares at l, l + 32, ... in turn, and the xor butterfly leaves the row's sum on every lane. Every
// lane of the warp calls it (the butterfly's shuffles).
template <DType D>
__device__ __forceinline__ float warp_row_sum_of_squares(const typename Elem<D>::T* row, std::size_t length,
                                                         int lane) {
  static_assert(numerics::kRowLanes == 32, "a row's lane sums are a warp's lanes");
  float s = 0.0f;
  for (std::size_t j = static_cast<std::size_t>(lane); j < length; j += numerics::kRowLanes) {
    s = numerics::add_square(s, Elem<D>::load(row[j]));
  }
#pragma unroll
  for (int offset = numerics::kRowLanes / 2; offset >= 1; offset /= 2) {
    s = numerics::add_lanes(s, __shfl_xor_sync(0xFFFFFFFFu, s, offset));
  }
  return s;
}

// Gains 'sum' (numerics 6.1 step 8): the ratio rank r's row t applies, the state's of the call's kind,
// else the other kind's, else none (0: R = 0). A fresh state applies nothing, so its stale ratios
// are never read: the reset cleared which kinds are held.
__device__ __forceinline__ float applied_ratio(const EmulateParams& a, std::size_t r, std::size_t t) {
  const int kind = a.ratios_held[a.site_kind] != 0 ? a.site_kind : (a.ratios_held[1 - a.site_kind] != 0 ? 1 - a.site_kind : -1);
  if (kind < 0) return 0.0f;
  return a.row_ratios[(static_cast<std::size_t>(kind) * a.ranks + r) * a.stream_rows + t];
}

// Compensator units 'stream' (docs/numerics.md 6.1 steps 1-3): one warp per rank and row. Lane l
// sums the squares of the row's dtype(x) at l, l + 32, ... in turn, the xor butterfly leaves the
// row's sum of squares q on every lane, and lane 0 stores the gains of rho = sqrt(q / H), and with a
// clip the row's bound (step 7). With profile 'sqrt' the grid's threads first form the site's
// factors f_j (step 6), one feature each; in mode 'deficit' (numerics 6.2) the floored weights wf_j,
// and lane 0 stores the row's estimate e = fp32(kappa * rho) in place of R.
template <DType D>
__global__ void __launch_bounds__(kBlockThreads) emulate_stream_gains_kernel(EmulateParams a) {
  using T = typename Elem<D>::T;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const std::size_t rows = static_cast<std::size_t>(a.ranks) * a.stream_rows;
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * kWarpsPerBlock;
  const float n = static_cast<float>(a.row_length);
  if (a.profile_factors != nullptr || a.deficit_weights != nullptr) {
    const std::size_t threads = static_cast<std::size_t>(gridDim.x) * kBlockThreads;
    for (std::size_t j = static_cast<std::size_t>(blockIdx.x) * kBlockThreads + threadIdx.x; j < a.row_length;
         j += threads) {
      if (a.profile_factors != nullptr) {
        a.profile_factors[j] = numerics::profile_factor(a.weights[j], a.weight_rms);
      } else {
        a.deficit_weights[j] = numerics::deficit_weight(a.weights[j], a.weight_rms);
      }
    }
  }
  // w is uniform over the warp: every lane runs the butterfly's shuffles.
  for (std::size_t w = static_cast<std::size_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; w < rows; w += warps) {
    const std::size_t r = w / a.stream_rows;
    const T* row = static_cast<const T*>(a.parts) + r * a.count + (w - r * a.stream_rows) * a.row_length;
    const float s = warp_row_sum_of_squares<D>(row, a.row_length, lane);
    if (lane == 0) {
      const float rho = numerics::row_rms(s, n);
      if (a.own_rms != nullptr) {
        const float ratio = applied_ratio(a, r, w - r * a.stream_rows);
        const float from_stream = a.deficit_weights != nullptr ? numerics::deficit_estimate(ratio, rho)
                                                               : numerics::sum_from_stream(a.weight_rms, ratio, rho);
        a.stream_gains[w] = {0.0f, from_stream};
        a.own_rms[w] = rho;
      } else {
        a.stream_gains[w] = numerics::stream_gains(a.weight_rms, rho);
      }
      if (a.clip_bounds != nullptr) a.clip_bounds[w] = numerics::clip_bound(a.clip, rho);
    }
  }
}

// Gains 'sum' after the main kernel (numerics 6.1 step 8): one warp per row. Lane l sums the squares
// of the delivered row at l, l + 32, ... (steps 1 and 2 over y), the butterfly leaves r on every
// lane, G = w / r; then for every rank lane 0 stores the row's ratio r / rho of the call's kind and
// the lanes update the rank's averages of the row's elements from the residuals the main kernel
// left, fp32(u * G) (times f_j with the profile), as update_loaded does with a row's gains. In mode
// 'deficit' (numerics 6.2) the main kernel left d = fp32(u - c) there, and the deficit takes
// fp32(d * G_j) with G_j = fp32(w_j / r), the feature's weight in place of their RMS.
template <DType D>
__global__ void __launch_bounds__(kBlockThreads) emulate_sum_update_kernel(EmulateParams a) {
  using T = typename Elem<D>::T;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * kWarpsPerBlock;
  const float n = static_cast<float>(a.row_length);
  for (std::size_t t = static_cast<std::size_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; t < a.stream_rows;
       t += warps) {
    const T* row = static_cast<const T*>(a.out) + t * a.row_length;
    const float r_sum = numerics::row_rms(warp_row_sum_of_squares<D>(row, a.row_length, lane), n);
    const float g = numerics::stream_gains(a.weight_rms, r_sum).to_stream;
    for (int r = 0; r < a.ranks; ++r) {
      const std::size_t rank_row = static_cast<std::size_t>(r) * a.stream_rows + t;
      if (lane == 0) {
        a.row_ratios[(static_cast<std::size_t>(a.site_kind) * a.ranks + r) * a.stream_rows + t] =
            numerics::sum_ratio(r_sum, a.own_rms[rank_row]);
      }
      for (std::size_t j = static_cast<std::size_t>(lane); j < a.row_length; j += numerics::kRowLanes) {
        const std::size_t e = static_cast<std::size_t>(r) * a.state_stride + t * a.row_length + j;
        if (a.deficit_weights != nullptr) {
          float d[E] = {};
          float g_j[E] = {};
          d[0] = a.sum_residuals[e];
          g_j[0] = numerics::deficit_to_stream(a.weights[j], r_sum);
          float m1[E], m2[E];
          load_state<E>(a.comp, e, 1, m1, m2);
          update_deficit_at_site<E>(d, g_j, m1);
          store_state<E>(a.comp, e, 1, m1, m2);
          continue;
        }
        float u[E] = {};
        u[0] = numerics::to_stream(a.sum_residuals[e], g);
        if (a.profile_factors != nullptr) u[0] = numerics::to_profile(u[0], a.profile_factors[j]);
        float m1[E], m2[E];
        load_state<E>(a.comp, e, 1, m1, m2);
        update_state<E, true>(a.comp, u, m1, m2);
        store_state<E>(a.comp, e, 1, m1, m2);
      }
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) a.ratios_held[a.site_kind] = 1;
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

cudaError_t emulate_sum_update(DType dtype, const EmulateParams& p, cudaStream_t stream) {
  const std::size_t blocks = (p.stream_rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  const auto grid = static_cast<unsigned>(blocks < kMaxGridCap ? (blocks < 1 ? 1 : blocks) : kMaxGridCap);
  switch (dtype) {
    case DType::kFloat32: emulate_sum_update_kernel<DType::kFloat32><<<grid, kBlockThreads, 0, stream>>>(p); break;
    case DType::kBFloat16: emulate_sum_update_kernel<DType::kBFloat16><<<grid, kBlockThreads, 0, stream>>>(p); break;
    case DType::kFloat16: emulate_sum_update_kernel<DType::kFloat16><<<grid, kBlockThreads, 0, stream>>>(p); break;
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
