// The exact small-message path (docs/numerics.md 4, "Exact path"): a one-shot kernel for the
// latency-bound sizes. Every rank writes its fp32 x' into a staging slot on every rank, then every
// rank sums the P slots in rank order and rounds once to the dtype, so all ranks agree bit for bit.
// Staging slots alternate between two parities by epoch: a rank can run at most one call ahead of
// a peer (it cannot finish a call without the peer's data of that call), so the slot it writes is
// never the one the peer is still reading.
#include "kernel_args.h"
#include "lane_ops.cuh"
#include "launch.h"

namespace echo::cuda {
namespace {

using namespace device;

constexpr int kVec = 4;                                // elements per access
constexpr int kVecsPerThread = kExactChunk / (kBlockThreads * kVec);  // 4
static_assert(kVecsPerThread * kBlockThreads * kVec == kExactChunk, "chunk = block x 16 elements");

__device__ __forceinline__ float* staging(const CallArgs& a, int holder, int parity, int src) {
  return reinterpret_cast<float*>(a.peer_base[holder] + a.layout.exact_offset) +
         (static_cast<std::size_t>(parity) * a.ranks + src) * a.layout.exact_capacity;
}

__device__ __forceinline__ unsigned long long* exact_flag(const CallArgs& a, int holder, int src, int chunk) {
  const std::size_t per_src = a.layout.exact_capacity / kExactChunk;
  return reinterpret_cast<unsigned long long*>(a.peer_base[holder] + a.layout.exact_flags_offset) +
         static_cast<std::size_t>(src) * per_src + chunk;
}

// Four consecutive elements in the dtype <-> floats; one 8- or 16-byte access when aligned.
template <DType D>
__device__ __forceinline__ void load4(const void* base, std::size_t e0, int valid, bool aligned, float (&v)[kVec]) {
  using T = typename Elem<D>::T;
  const T* p = static_cast<const T*>(base) + e0;
  if (valid == kVec && aligned) {
    if constexpr (sizeof(T) == 4) {
      const float4 f = *reinterpret_cast<const float4*>(p);
      v[0] = f.x; v[1] = f.y; v[2] = f.z; v[3] = f.w;
    } else {
      const uint2 u = *reinterpret_cast<const uint2*>(p);
      v[0] = Elem<D>::load(static_cast<T>(u.x & 0xFFFFu)); v[1] = Elem<D>::load(static_cast<T>(u.x >> 16));
      v[2] = Elem<D>::load(static_cast<T>(u.y & 0xFFFFu)); v[3] = Elem<D>::load(static_cast<T>(u.y >> 16));
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < kVec; ++k) v[k] = k < valid ? Elem<D>::load(p[k]) : 0.0f;
}

template <DType D>
__device__ __forceinline__ void store4(void* base, std::size_t e0, int valid, bool aligned, const float (&v)[kVec]) {
  using T = typename Elem<D>::T;
  T* p = static_cast<T*>(base) + e0;
  if (valid == kVec && aligned) {
    if constexpr (sizeof(T) == 4) {
      *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
      const unsigned lo = static_cast<unsigned>(Elem<D>::store(v[0])) | (static_cast<unsigned>(Elem<D>::store(v[1])) << 16);
      const unsigned hi = static_cast<unsigned>(Elem<D>::store(v[2])) | (static_cast<unsigned>(Elem<D>::store(v[3])) << 16);
      *reinterpret_cast<uint2*>(p) = make_uint2(lo, hi);
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    if (k < valid) p[k] = Elem<D>::store(v[k]);
  }
}

template <DType D>
__device__ __forceinline__ bool aligned4(const void* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & (kVec * sizeof(typename Elem<D>::T) - 1)) == 0;
}

// Thread `tid` owns the float4 slots tid, tid + 256, ... of a chunk, so each warp access covers
// 512 contiguous bytes (whole sectors on NVLink).
template <DType D>
__global__ void __launch_bounds__(kBlockThreads) exact_allreduce_kernel(CallArgs a, bool last_round) {
  __shared__ int group_bad[kExactChunk / kMinGroup];
  const unsigned long long epoch = a.control->seq + 1;
  const int parity = static_cast<int>(epoch & 1u);
  Scaling sc = make_scaling(0);
  bool ok = true;
  if (a.backward) ok = block_read_scaling(a, epoch - a.round, &sc);
  const bool fresh = a.comp.mode != CompensatorMode::kOff && *a.comp.fresh != 0;
  const bool in_aligned = aligned4<D>(a.in);
  const bool out_aligned = aligned4<D>(a.out);
  const int chunks = static_cast<int>((a.exact_count + kExactChunk - 1) / kExactChunk);
  auto local_of = [&](int c, int j) {
    return static_cast<std::size_t>(c) * kExactChunk + (static_cast<std::size_t>(j) * kBlockThreads + threadIdx.x) * kVec;
  };
  auto valid_of = [&](std::size_t local) {
    if (local >= a.exact_count) return 0;
    const std::size_t left = a.exact_count - local;
    return left < static_cast<std::size_t>(kVec) ? static_cast<int>(left) : kVec;
  };

  // Stage push: x' (scaled in backward mode) into every rank's staging slot of this rank.
  for (int c = blockIdx.x; ok && c < chunks; c += gridDim.x) {
#pragma unroll
    for (int j = 0; j < kVecsPerThread; ++j) {
      const std::size_t local = local_of(c, j);
      const std::size_t e0 = a.exact_begin + local;
      const int valid = valid_of(local);
      float x[kVec], m1[kVec], m2[kVec];
      load4<D>(a.in, e0, valid, in_aligned, x);
      load_state<kVec>(a.comp, e0, valid, m1, m2);
      apply_compensation<kVec>(a.comp, fresh, m1, m2, x);
      if (a.compensated != nullptr) store_f32<kVec>(a.compensated + e0, valid, x);
#pragma unroll
      for (int k = 0; k < kVec; ++k) x[k] = a.backward ? fmul(x[k], sc.scale) : x[k];
      for (int r = 0; r < a.ranks; ++r) {
        const int holder = (a.rank + r) % a.ranks;
        store_f32<kVec>(staging(a, holder, parity, a.rank) + local, valid, x);
      }
    }
    // Release after the barrier: every thread's staging stores precede the flag.
    __syncthreads();
    if (threadIdx.x < a.ranks) {
      const int holder = (a.rank + threadIdx.x) % a.ranks;
      store_release_sys(exact_flag(a, holder, a.rank, c), epoch);
    }
  }

  // Stage reduce: the P slots in rank order, rounded once; then the compensator update.
  const std::size_t gps = a.groups_per_segment;
  const std::size_t own_begin = static_cast<std::size_t>(a.rank) * gps * a.group;
  const std::size_t own_end = static_cast<std::size_t>(a.rank + 1) * gps * a.group;
  const int groups_in_chunk = kExactChunk / a.group;
  for (int c = blockIdx.x; ok && c < chunks; c += gridDim.x) {
    for (int r = 0; r < a.ranks && ok; ++r) {
      ok = block_wait_flag(a.wait, exact_flag(a, a.rank, r, c), epoch, Stage::kExact, r, c);
    }
    if (!ok) break;
    if (threadIdx.x < groups_in_chunk) group_bad[threadIdx.x] = 0;
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kVecsPerThread; ++j) {
      const std::size_t local = local_of(c, j);
      const std::size_t e0 = a.exact_begin + local;
      const int valid = valid_of(local);
      float acc[kVec];
      int bad = 0;
      for (int r = 0; r < a.ranks; ++r) {
        float v[kVec];
        const float* src = staging(a, a.rank, parity, r) + local;
        if (valid == kVec) {
          const float4 f = __ldcg(reinterpret_cast<const float4*>(src));
          v[0] = f.x; v[1] = f.y; v[2] = f.z; v[3] = f.w;
        } else {
#pragma unroll
          for (int k = 0; k < kVec; ++k) v[k] = k < valid ? __ldcg(src + k) : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          if (k < valid) bad |= !is_finite(v[k]);
          acc[k] = r == 0 ? v[k] : fadd(acc[k], v[k]);
        }
      }
      float y[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) y[k] = round_to<D>(a.backward ? fmul(acc[k], sc.unscale) : acc[k]);
      // Poisoned groups (any non-finite x'), counted by the rank owning the group's segment.
      if (bad) group_bad[(local - static_cast<std::size_t>(c) * kExactChunk) / a.group] = 1;
      if (a.comp.mode != CompensatorMode::kOff) {
        // x' again from the input and the not yet updated state (this thread's own elements, so
        // an in-place output has not overwritten them).
        float x[kVec], m1[kVec], m2[kVec];
        load4<D>(a.in, e0, valid, in_aligned, x);
        load_state<kVec>(a.comp, e0, valid, m1, m2);
        apply_compensation<kVec>(a.comp, fresh, m1, m2, x);
        float u[kVec];
        const float p = static_cast<float>(a.ranks);
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          if (a.comp.residual == ResidualMode::kGlobal) {
            u[k] = fsub(x[k], fdiv(y[k], p));
          } else {
            const std::size_t e = e0 + k;
            const bool own = e >= own_begin && e < own_end;
            u[k] = own ? fsub(a.backward ? fmul(acc[k], sc.unscale) : acc[k], y[k]) : 0.0f;
          }
        }
        update_state<kVec>(a.comp, u, m1, m2);
        store_state<kVec>(a.comp, e0, valid, m1, m2);
      }
      store4<D>(a.out, e0, valid, out_aligned, y);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned long long poisoned = 0;
      for (int gi = 0; gi < groups_in_chunk; ++gi) {
        const std::size_t first = a.exact_begin + static_cast<std::size_t>(c) * kExactChunk +
                                  static_cast<std::size_t>(gi) * a.group;
        if (group_bad[gi] && first >= own_begin && first < own_end && first < a.count) ++poisoned;
      }
      if (poisoned != 0) atomicAdd(&a.control->poisoned[(epoch - a.round) & 1], poisoned);
    }
    __syncthreads();
  }

  // The exact path updates the state in every compensated mode.
  finish_launch(a, epoch, sc.k, last_round, 1, a.comp.mode != CompensatorMode::kOff);
}

}  // namespace

cudaError_t exact_allreduce_preload() {
  const void* fns[] = {reinterpret_cast<const void*>(exact_allreduce_kernel<DType::kFloat32>),
                       reinterpret_cast<const void*>(exact_allreduce_kernel<DType::kBFloat16>),
                       reinterpret_cast<const void*>(exact_allreduce_kernel<DType::kFloat16>)};
  for (const void* fn : fns) {
    cudaFuncAttributes attr;
    if (const cudaError_t e = cudaFuncGetAttributes(&attr, fn); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

int exact_allreduce_max_blocks_per_sm() {
  int n = 1;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &n, reinterpret_cast<const void*>(exact_allreduce_kernel<DType::kFloat32>), kBlockThreads, 0);
  return n < 1 ? 1 : n;
}

cudaError_t exact_allreduce(const CallArgs& a, bool last_round, int grid, cudaStream_t stream) {
  switch (a.dtype) {
    case DType::kFloat32:
      exact_allreduce_kernel<DType::kFloat32><<<grid, kBlockThreads, 0, stream>>>(a, last_round);
      break;
    case DType::kBFloat16:
      exact_allreduce_kernel<DType::kBFloat16><<<grid, kBlockThreads, 0, stream>>>(a, last_round);
      break;
    case DType::kFloat16:
      exact_allreduce_kernel<DType::kFloat16><<<grid, kBlockThreads, 0, stream>>>(a, last_round);
      break;
  }
  return cudaGetLastError();
}

}  // namespace echo::cuda
