// The exact small-message path (docs/numerics.md 4, "Exact path"): a one-shot kernel for the
// latency-bound sizes. Every rank sends its x' to every peer, then every rank sums the P values of
// each element in rank order and rounds once to the dtype, so all ranks agree bit for bit.
//
// Transport: low-latency lines, the protocol of NCCL's LL. A 16-byte line holds two 8-byte words,
// each a 32-bit payload and a 32-bit flag derived from the launch epoch. A line is written with one
// 16-byte store whose 8-byte halves each become visible whole, so a reader that sees the current
// flag in both halves also sees both payloads: no fence, no separate flag, no barrier between the
// two ranks. The payload is 16-bit (four elements per line) wherever the sum takes 16-bit values:
// the raw input when x' is the input itself (forward, no compensator, 16-bit dtype), and x'
// rounded to bf16 in forward bf16 calls with the compensator (docs/numerics.md 4); elsewhere x' as
// fp32 (two elements per line). A rank's own values never leave its registers.
//
// The NCCL transport shares no memory between ranks: it runs the kernel twice per round, the send
// part (stages kStagePush) into the rank's own slot of its own staging, then, after the host's
// grouped ncclSend/ncclRecv of that slot to every peer, the reduce part (kStageReduce), which reads
// the lines of the launch before. The stream orders everything there, so one parity suffices.
//
// Staging alternates between two parities by epoch: a rank can run at most one call ahead of a
// peer (it cannot finish a call without the peer's data of that call), so the lines it writes are
// never the ones the peer is still reading. A reader zeroes every line it consumed, so a line holds
// either flag 0 (never a valid flag) or data of the current or the next call of its parity: a stale
// line can never pass for a new one, however many launches lie in between.
#include <algorithm>

#include "kernel_args.h"
#include "device/lane_ops.cuh"
#include "launch.h"

namespace echo::cuda {
namespace {

using namespace device;

constexpr int kVec = 4;  // elements per thread and chunk
static_assert(kExactChunk == kBlockThreads * kVec, "a chunk is one block of 4-element lanes");
static_assert(kExactChunk % kMaxGroup == 0, "every group lies inside one chunk");

// Flag of a launch: never 0, the value of a zeroed line.
__device__ __forceinline__ unsigned line_flag(unsigned long long epoch) {
  return static_cast<unsigned>(epoch % 0xFFFFFFFFull) + 1u;
}

// Lines that rank `src` writes into rank `holder`'s staging for one parity: exact_capacity / 2 of
// them (enough for fp32 payloads).
__device__ __forceinline__ uint4* staging(const CallArgs& a, int holder, int parity, int src) {
  return reinterpret_cast<uint4*>(a.peer_base[holder] + a.layout.exact_offset) +
         (static_cast<std::size_t>(parity) * a.ranks + src) * (a.layout.exact_capacity / 2);
}

__device__ __forceinline__ void store_line(uint4* p, unsigned lo, unsigned hi, unsigned flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(lo), "r"(flag), "r"(hi),
               "r"(flag)
               : "memory");
}

__device__ __forceinline__ uint4 load_line(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

// Waits until both halves of the line carry `flag`, then zeroes the line. The payloads are v.x, v.z.
__device__ __forceinline__ bool take_line(const CallArgs& a, uint4* p, unsigned flag, unsigned long long epoch,
                                          int peer, long long chunk, uint4* v) {
  const bool ok = spin_until(
      a.wait, [&] { *v = load_line(p); return v->y == flag && v->w == flag; },
      [&] { return static_cast<unsigned long long>(v->y); }, Stage::kExact, peer, chunk, epoch);
  if (ok) store_line(p, 0u, 0u, 0u);
  return ok;
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

// Raw 16-bit inputs of a lane as two words (the first element in the low half), zeros past `valid`.
template <DType D>
__device__ __forceinline__ uint2 load4_raw(const void* base, std::size_t e0, int valid, bool aligned) {
  static_assert(sizeof(typename Elem<D>::T) == 2, "16-bit dtypes only");
  const std::uint16_t* p = static_cast<const std::uint16_t*>(base) + e0;
  if (valid == kVec && aligned) return *reinterpret_cast<const uint2*>(p);
  unsigned h[kVec];
#pragma unroll
  for (int k = 0; k < kVec; ++k) h[k] = k < valid ? p[k] : 0u;
  return make_uint2(h[0] | (h[1] << 16), h[2] | (h[3] << 16));
}

// The configuration a call's kernel is compiled for (kernel_args.h): forward bf16 calls with the
// dual compensator run copies with the residual and state type fixed (docs/performance.md, "Kernels
// compiled per configuration"); the rest the generic kernel, which reads them at run time.
inline int exact_config(const CallArgs& a) {
  return a.dtype == DType::kBFloat16 && !a.backward ? compensator_config(a.comp) : kConfigAny;
}

// Thread t owns elements 4t .. 4t + 3 of each chunk it visits, so a warp's line stores cover 512
// (raw payloads) or 1024 (fp32 payloads) contiguous bytes. Four resident blocks per multiprocessor
// (at most 64 registers, no spills) let a 1 MiB message's 512 chunks run in one wave on 132
// multiprocessors, where three left 116 blocks a second chunk (2 x H200, CUDA graphs: `echo4` 1 MiB
// 11.2-11.3 -> 10.4 us, compensated 13.4-14.6 -> 12.1-12.5 us; docs/performance.md, "Exact path for
// small messages").
template <DType D, int CONFIG = kConfigAny>
__global__ void __launch_bounds__(kBlockThreads, 4) exact_allreduce_kernel(CallArgs a, bool last_round) {
  static_assert(CONFIG == kConfigAny || D == DType::kBFloat16, "the specialized kernels are bf16 ones");
  // kSpec: forward (a.backward is read as false), compensator arguments from spec_args.
  constexpr bool kSpec = CONFIG != kConfigAny;
  const CompensatorArgs spec_args = configured<CONFIG>(a.comp);
  const CompensatorArgs& comp_args = kSpec ? spec_args : a.comp;
  __shared__ int group_bad[kExactChunk / kMinGroup];
  const unsigned long long epoch = a.control->seq + 1;
  const bool send = (a.stages & kStagePush) != 0;
  const bool reduce = (a.stages & kStageReduce) != 0;
  // The epoch whose lines this launch writes or reads: the NCCL transport's reduce launch reads
  // the lines its send launch (one epoch earlier) wrote.
  const unsigned long long line_epoch = a.nccl && !send ? epoch - 1 : epoch;
  const int parity = a.nccl ? 0 : static_cast<int>(line_epoch & 1u);
  const unsigned flag = line_flag(line_epoch);
  Scaling sc = make_scaling(0);
  bool ok = true;
  if (!kSpec && a.backward) ok = block_read_scaling(a, epoch - a.round, &sc);
  const bool comp = comp_args.mode != CompensatorMode::kOff;
  const bool fresh = comp && *comp_args.fresh != 0;
  // The sum takes 16-bit values: ship them four per line. Without the compensator they are the
  // raw input; with it (bf16 only) x' rounded to bf16 (echo::exact_path_rounds_x_prime).
  constexpr bool k16 = sizeof(typename Elem<D>::T) == 2;
  constexpr bool kRoundsXPrime = exact_path_rounds_x_prime(D, Direction::kForward);
  const bool raw = exact_terms_16bit(D, !kSpec && a.backward, comp);
  const bool rounded = raw && comp;  // x' rounded to bf16 before the sum
  const bool in_aligned = aligned4<D>(a.in);
  const bool out_aligned = aligned4<D>(a.out);
  const int chunks = static_cast<int>((a.exact_count + kExactChunk - 1) / kExactChunk);
  auto local_of = [&](int c) {
    return static_cast<std::size_t>(c) * kExactChunk + static_cast<std::size_t>(threadIdx.x) * kVec;
  };
  auto valid_of = [&](std::size_t local) {
    if (local >= a.exact_count) return 0;
    const std::size_t left = a.exact_count - local;
    return left < static_cast<std::size_t>(kVec) ? static_cast<int>(left) : kVec;
  };
  // x' of this rank's lane (compensated, not yet scaled); the state is left in m1, m2.
  auto own_values = [&](std::size_t e0, int valid, float (&x)[kVec], float (&m1)[kVec], float (&m2)[kVec]) {
    load4<D>(a.in, e0, valid, in_aligned, x);
    load_state<kVec>(comp_args, e0, valid, m1, m2);
    apply_compensation<kVec>(comp_args, fresh, m1, m2, x);
  };
  // The 16-bit values of x' the rounded payload carries (zeros past `valid`).
  auto rounded_bits = [&](const float (&x)[kVec], int valid) {
    unsigned h[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) h[k] = k < valid ? Elem<D>::store(x[k]) : 0u;
    return make_uint2(h[0] | (h[1] << 16), h[2] | (h[3] << 16));
  };

  // Send: this rank's lane to every peer, starting with the next rank so the links load evenly
  // (NCCL transport: into the own slot of the own staging, which the host then sends).
  const int first_holder = a.nccl ? 0 : 1;
  const int end_holder = a.nccl ? 1 : a.ranks;
  for (int c = blockIdx.x; send && ok && c < chunks; c += gridDim.x) {
    const std::size_t local = local_of(c);
    const std::size_t e0 = a.exact_begin + local;
    const int valid = valid_of(local);
    if (valid == 0) continue;
    if constexpr (k16) {
      if (raw && !rounded) {
        // The raw input, as it is.
        const uint2 u = load4_raw<D>(a.in, e0, valid, in_aligned);
        if (a.compensated != nullptr) {
          float x[kVec];
          load4<D>(a.in, e0, valid, in_aligned, x);
          store_f32_canonical<kVec>(a.compensated + e0, valid, x);
        }
        for (int r = first_holder; r < end_holder; ++r) {
          store_line(staging(a, (a.rank + r) % a.ranks, parity, a.rank) + local / 4, u.x, u.y, flag);
        }
        continue;
      }
    }
    float x[kVec], m1[kVec], m2[kVec];
    own_values(e0, valid, x, m1, m2);
    if (a.compensated != nullptr) store_f32_canonical<kVec>(a.compensated + e0, valid, x);
    if constexpr (kRoundsXPrime) {
      if (rounded) {
        const uint2 u = rounded_bits(x, valid);
        for (int r = first_holder; r < end_holder; ++r) {
          store_line(staging(a, (a.rank + r) % a.ranks, parity, a.rank) + local / 4, u.x, u.y, flag);
        }
        continue;
      }
    }
    unsigned w[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) w[k] = __float_as_uint((!kSpec && a.backward) ? __fmul_rn(x[k], sc.scale) : x[k]);
    for (int r = first_holder; r < end_holder; ++r) {
      uint4* line = staging(a, (a.rank + r) % a.ranks, parity, a.rank) + local / 2;
      store_line(line, w[0], w[1], flag);
      store_line(line + 1, w[2], w[3], flag);
    }
  }

  // Reduce: the P values of each element in rank order, rounded once; then the compensator update.
  const std::size_t gps = a.groups_per_segment;
  const std::size_t own_begin = static_cast<std::size_t>(a.rank) * gps * a.group;
  const std::size_t own_end = static_cast<std::size_t>(a.rank + 1) * gps * a.group;
  const int groups_in_chunk = kExactChunk / a.group;
  for (int c = blockIdx.x; reduce && ok && c < chunks; c += gridDim.x) {
    if (threadIdx.x < groups_in_chunk) group_bad[threadIdx.x] = 0;
    __syncthreads();
    const std::size_t local = local_of(c);
    const std::size_t e0 = a.exact_begin + local;
    const int valid = valid_of(local);
    bool mine = true;
    if (valid > 0) {
      float x[kVec], m1[kVec], m2[kVec];
      own_values(e0, valid, x, m1, m2);
      // This rank's term of the sum: x' (times 2^k backward), or x' rounded to bf16.
      float own[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        own[k] = rounded ? round_to<D>(x[k]) : (!kSpec && a.backward) ? __fmul_rn(x[k], sc.scale) : x[k];
      }
      float acc[kVec];
      int bad = 0;
      for (int r = 0; r < a.ranks && mine; ++r) {
        float v[kVec];
        if (r == a.rank) {
#pragma unroll
          for (int k = 0; k < kVec; ++k) v[k] = own[k];
        } else if (raw) {
          uint4 l;
          mine = take_line(a, staging(a, a.rank, parity, r) + local / 4, flag, epoch, r, c, &l);
          using T = typename Elem<D>::T;
          v[0] = Elem<D>::load(static_cast<T>(l.x & 0xFFFFu));
          v[1] = Elem<D>::load(static_cast<T>(l.x >> 16));
          v[2] = Elem<D>::load(static_cast<T>(l.z & 0xFFFFu));
          v[3] = Elem<D>::load(static_cast<T>(l.z >> 16));
        } else {
          uint4 l0, l1;
          uint4* line = staging(a, a.rank, parity, r) + local / 2;
          mine = take_line(a, line, flag, epoch, r, c, &l0) && take_line(a, line + 1, flag, epoch, r, c, &l1);
          v[0] = __uint_as_float(l0.x);
          v[1] = __uint_as_float(l0.z);
          v[2] = __uint_as_float(l1.x);
          v[3] = __uint_as_float(l1.z);
        }
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          if (k < valid) bad |= !is_finite(v[k]);
          acc[k] = r == 0 ? v[k] : __fadd_rn(acc[k], v[k]);
        }
      }
      if (mine) {
        float y[kVec];
#pragma unroll
        for (int k = 0; k < kVec; ++k) y[k] = round_to<D>((!kSpec && a.backward) ? __fmul_rn(acc[k], sc.unscale) : acc[k]);
        // Poisoned groups (any non-finite x'), counted by the rank owning the group's segment.
        if (bad) group_bad[threadIdx.x * kVec / a.group] = 1;
        if (comp) {
          float u[kVec];
          const float p = static_cast<float>(a.ranks);
#pragma unroll
          for (int k = 0; k < kVec; ++k) {
            if (comp_args.residual == ResidualMode::kGlobal) {
              u[k] = numerics::global_residual(x[k], y[k], p);
            } else {
              // Local: the owner's gather error on its own segment, after this rank's rounding
              // error of x' wherever x' was rounded.
              const std::size_t e = e0 + k;
              const bool owned = e >= own_begin && e < own_end;
              const float g = owned ? numerics::local_residual((!kSpec && a.backward) ? __fmul_rn(acc[k], sc.unscale) : acc[k], y[k]) : 0.0f;
              if (rounded) {
                const float d = numerics::local_residual(x[k], own[k]);
                u[k] = owned ? numerics::local_residual_sum(d, g) : d;
              } else {
                u[k] = g;
              }
            }
          }
          update_state<kVec>(comp_args, u, m1, m2);
          store_state<kVec>(comp_args, e0, valid, m1, m2);
        }
        store4<D>(a.out, e0, valid, out_aligned, y);
      }
    }
    ok = __syncthreads_and(mine) != 0;
    if (!ok) break;
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
  finish_launch(a, epoch, sc.k, last_round, 1, comp);
}

// The kernel's three dtype variants and the specialized bf16 ones.
constexpr int kExactConfigs[] = {kConfigDual, kConfigDual | kConfigLocal, kConfigDual | kConfigBf16State,
                               kConfigDualLocalBf16};
const void* const kExactVariants[] = {
    reinterpret_cast<const void*>(exact_allreduce_kernel<DType::kFloat32>),
    reinterpret_cast<const void*>(exact_allreduce_kernel<DType::kBFloat16>),
    reinterpret_cast<const void*>(exact_allreduce_kernel<DType::kFloat16>),
    reinterpret_cast<const void*>(exact_allreduce_kernel<DType::kBFloat16, kExactConfigs[0]>),
    reinterpret_cast<const void*>(exact_allreduce_kernel<DType::kBFloat16, kExactConfigs[1]>),
    reinterpret_cast<const void*>(exact_allreduce_kernel<DType::kBFloat16, kExactConfigs[2]>),
    reinterpret_cast<const void*>(exact_allreduce_kernel<DType::kBFloat16, kExactConfigs[3]>)};

}  // namespace

cudaError_t exact_allreduce_preload() {
  return load_kernels(kExactVariants, sizeof(kExactVariants) / sizeof(kExactVariants[0]));
}

// The fewest resident blocks per multiprocessor of the kernel's variants (they differ in
// registers): ranks sharing a GPU each launch their share of this many, and a share sized by a
// larger count would leave the last rank on the GPU without a resident block while the others spin
// waiting for its lines.
int exact_allreduce_max_blocks_per_sm() {
  int fewest = resident_blocks_per_sm(kExactVariants[0]);
  for (const void* fn : kExactVariants) fewest = std::min(fewest, resident_blocks_per_sm(fn));
  return fewest;
}

cudaError_t exact_allreduce(const CallArgs& a, bool last_round, int grid, cudaStream_t stream) {
  switch (a.dtype) {
    case DType::kFloat32:
      exact_allreduce_kernel<DType::kFloat32><<<grid, kBlockThreads, 0, stream>>>(a, last_round);
      break;
    case DType::kBFloat16:
      switch (exact_config(a)) {
#define ECHO_EXACT_CONFIG(S)                                                                        \
  case S:                                                                                         \
    exact_allreduce_kernel<DType::kBFloat16, S><<<grid, kBlockThreads, 0, stream>>>(a, last_round); \
    break;
        ECHO_EXACT_CONFIG(kExactConfigs[0])
        ECHO_EXACT_CONFIG(kExactConfigs[1])
        ECHO_EXACT_CONFIG(kExactConfigs[2])
        ECHO_EXACT_CONFIG(kExactConfigs[3])
#undef ECHO_EXACT_CONFIG
        default:
          exact_allreduce_kernel<DType::kBFloat16><<<grid, kBlockThreads, 0, stream>>>(a, last_round);
      }
      break;
    case DType::kFloat16:
      exact_allreduce_kernel<DType::kFloat16><<<grid, kBlockThreads, 0, stream>>>(a, last_round);
      break;
  }
  return cudaGetLastError();
}

}  // namespace echo::cuda
