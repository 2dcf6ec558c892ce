// The one-GPU emulation of the P-rank all-reduce (echo/cuda/emulate.h; numerics in
// docs/numerics.md 3-6). Segments lie on group boundaries, so every group of the message is
// independent: the lanes of one group (a block iteration of 1024 elements holds whole groups) take
// each rank's x' = x + c, quantize and dequantize it where the rank pushes (its group lies in
// another rank's segment), sum the P terms in fp32 in rank order with the owner's own values
// unquantized, quantize the sum once for the gather, store y = dtype_rne(deq * 2^-k), and update
// every rank's compensator state, all from registers. One launch per call; backward calls run the
// max |x'| kernel before it (the shared exponent needs every rank's whole message). The transport
// options of docs/numerics.md 2.4 (wide groups) and 2.6 (Hadamard rotation) run in instantiations
// of the quantized kernel of their own (OPTIONS: kOptionWide for wide groups alone, the default
// spec's, in the structure of the kNoOptions kernel; kAllOptions | kOptionStream for every call with
// the rotation or with compensator units 'stream', docs/numerics.md 6.1, and every call of mode
// 'deficit', 6.2), so the kNoOptions kernel (overflow-groups poison) has none of their code.
// Included once per dtype by emulate_allreduce_<dtype>.cu, which instantiate emulate_launch.
#pragma once

#include "emulate_args.h"
#include "kernels/emulate/lanes.cuh"
#include "kernels/emulate/ranks.cuh"
#include "kernels/emulate/rotation.cuh"
#include "kernels/instance_options.cuh"

namespace echo::cuda {
namespace emulate_detail {

// The shared exponent of the call: max |x'| of every rank, from emulate_backward_max_kernel.
__device__ __forceinline__ Scaling call_scaling(const EmulateParams& a) {
  return make_scaling(a.backward ? backward_exponent(__uint_as_float(a.report->max_abs_bits)) : 0);
}

// Rank r's x' in the call's units: times 2^k in a backward call (exact: a power of two).
__device__ __forceinline__ void scaled_terms(const EmulateParams& a, const Scaling& sc, const float (&x)[E],
                                             float (&v)[E]) {
#pragma unroll
  for (int k = 0; k < E; ++k) v[k] = a.backward ? __fmul_rn(x[k], sc.scale) : x[k];
}

// Local residual of a pushed segment: u = x' - v * 2^-k, the error rank r injected.
template <bool kStream = false>
__device__ __forceinline__ void update_pushed(const EmulateParams& a, int r, const LaneSpot& s, const Scaling& sc,
                                              const float (&x)[E], const float (&v)[E]) {
  float u[E];
#pragma unroll
  for (int k = 0; k < E; ++k) u[k] = __fsub_rn(x[k], a.backward ? __fmul_rn(v[k], sc.unscale) : v[k]);
  update_rank<E, kStream>(a, r, s, u);
}

// A group's map from its statistics: the fp16 map, or in an instantiation with wide groups (kWide)
// the wide map where the spec asks for it (qp.wide_scale) and the fp16 scale overflows, in a second
// pass of the same code (lane_group_map).
template <bool kWide>
__device__ __forceinline__ GroupMap group_map_of(const QuantParams& qp, float mn, float mx, bool finite) {
  return lane_group_map<kWide>(qp, mn, mx, finite, qp.wide_scale);
}

// Rank r's term in the units the quantized path sends: x' (times 2^k backward), recomputed from x'
// (a multiply is cheaper than the registers), or taken from xs in the rotation's instantiation
// (kRotation: there rotated once per call, rotation.cuh).
template <bool kRotation, int P>
__device__ __forceinline__ void send_term(const EmulateParams& a, const Scaling& sc, const float (&x)[P][E],
                                          const float (&xs)[P][E], int r, float (&v)[E]) {
  if constexpr (kRotation) {
#pragma unroll
    for (int k = 0; k < E; ++k) v[k] = xs[r][k];
  } else {
      scaled_terms(a, sc, x[r], v);
  }
}

// The rotation's instantiation's local residual of rank r's push v (in the sent units): rotated, it
// is taken from the de-rotated push (docs/numerics.md 2.6; the de-rotation's exchanges need the
// whole group, so every lane of it calls this, `pushes` saying which update), else from v.
template <bool kStream>
__device__ __forceinline__ void update_pushed_term(const EmulateParams& a, int r, const LaneSpot& s, const Scaling& sc,
                                                   bool pushes, bool rotation, const RotationLane& rl,
                                                   float4* exchange, const float (&x)[E], const float (&v)[E]) {
  if (rotation) {
    float vu[E];
#pragma unroll
    for (int k = 0; k < E; ++k) vu[k] = v[k];
    unrotate_lane<E>(rl, vu, exchange);
    if (pushes) update_pushed<kStream>(a, r, s, sc, x, vu);
    return;
  }
  if (pushes) update_pushed<kStream>(a, r, s, sc, x, v);
}

// The push and the owner's sum of a group of at most 32 lanes and at least P: the statistics of
// every pushing rank first, then lane j of the group computes rank j's map and every lane takes
// its rank's from there by shuffles (scale and zero-point bits, reciprocal: group_map_from_fields),
// so the group's P - 1 maps cost one map's instructions (the kernel is bound by its instructions).
// The values are those of the one-rank-at-a-time loop. kWide, kRotation, kStream: the emulation
// kernel's.
template <int P, bool kWide, bool kRotation, bool kStream>
__device__ __forceinline__ void push_maps_side_by_side(const EmulateParams& a, const LaneSpot& s,
                                                       const QuantParams& qp, const Scaling& sc, int lanes,
                                                       bool symmetric, bool local, bool rotation,
                                                       const RotationLane& rl, float4* exchange,
                                                       const float (&x)[P][E], const float (&xs)[P][E],
                                                       float (&acc)[E]) {
  const int lane = threadIdx.x & 31;
  const int first = lane & ~(lanes - 1);  // the group's first lane in the warp
  const int j = lane - first;
  float mn = 0.0f, mx = 0.0f;
  bool finite = true;
  bool any_push[P];
#pragma unroll
  for (int r = 0; r < P; ++r) {
    any_push[r] = __any_sync(0xFFFFFFFFu, s.valid > 0 && r != s.owner);
    if (!any_push[r]) continue;
    float v[E];
    send_term<kRotation, P>(a, sc, x, xs, r, v);
    const GroupStats st = group_stats<E>(v, s.valid, lanes);
    if (j == r) {
      mn = st.mn;
      mx = st.mx;
      finite = st.finite;
    }
  }
  const GroupMap mine = group_map_of<kWide>(qp, mn, mx, finite);
  const unsigned mine_fields = static_cast<unsigned>(mine.scale) | (static_cast<unsigned>(mine.zero_point) << 16);
#pragma unroll
  for (int r = 0; r < P; ++r) {
    float v[E];
    send_term<kRotation, P>(a, sc, x, xs, r, v);
    if (any_push[r]) {
      const unsigned fields = __shfl_sync(0xFFFFFFFFu, mine_fields, first + r);
      const float recip = __shfl_sync(0xFFFFFFFFu, mine.recip, first + r);
      const bool pushes = s.valid > 0 && r != s.owner;
      if (pushes) {
        const GroupMap map = group_map_from_fields(qp, static_cast<std::uint16_t>(fields & 0xFFFFu),
                                                   static_cast<std::uint16_t>(fields >> 16), recip);
        requantize_lane<E, kWide>(map, symmetric, a.bits, v, v);
        if constexpr (!kRotation) {
          if (local) update_pushed(a, r, s, sc, x[r], v);
        }
      }
      if constexpr (kRotation) {
        // The whole warp is here (any_push is warp-uniform): the de-rotation may shuffle.
        if (local) update_pushed_term<kStream>(a, r, s, sc, pushes, rotation, rl, exchange, x[r], v);
      }
    }
#pragma unroll
    for (int k = 0; k < E; ++k) acc[k] = r == 0 ? v[k] : __fadd_rn(acc[k], v[k]);
  }
}

// The quantized owner all-reduce (docs/numerics.md 4). OPTIONS (instance_options.cuh): the
// transport options the instantiation serves. Wide groups (2.4; kOptionWide alone runs the default
// kernel's structure, loads and register budget): the wide map in lane_group_map's second pass,
// the wide encode and decode in requantize_lane. The Hadamard rotation (2.6, kAllOptions): every
// rank's sent terms rotated once, the owner's sum and the gathered result in rotated units, the
// output and the local residuals de-rotated; the compensator state stays unrotated. Compensator units
// 'stream' (6.1, kOptionStream; mode 'deficit' of 6.2 too): where the call brings its rows' gains,
// x' and the residuals pass through them (ranks.cuh).
template <DType D, int P, int OPTIONS>
__global__ void __launch_bounds__(kBlockThreads, (quantized_min_blocks<D, (OPTIONS & kOptionRotation) != 0>()))
emulate_quantized_kernel(EmulateParams a) {
  constexpr bool kWide = (OPTIONS & kOptionWide) != 0;
  constexpr bool kRotation = (OPTIONS & kOptionRotation) != 0;
  constexpr bool kStream = (OPTIONS & kOptionStream) != 0;
  static_assert(!kStream || kRotation, "stream units run in the rotation's instantiation (its serial loads)");
  constexpr int kBatch = kRotation ? kSerialLoads : quantized_load_batch<D>();
  static_assert(kBatch >= 1, "at least one rank per batch");
  __shared__ float2 warp_stats[kWarpsPerBlock];
  __shared__ float4 rotation_exchange[kRotation ? kBlockThreads : 1];
  const bool comp = a.comp.mode != CompensatorMode::kOff;
  const bool local = comp && a.comp.residual == ResidualMode::kLocal;
  const bool fresh = comp && *a.comp.fresh != 0;
  const int lanes = a.group / E;        // lanes per group, uniform over the block
  const bool cross_warp = lanes > 32;   // groups span warps: every quantization is block-wide
  // Every pushing rank's map from its own lane of the group (push_maps_side_by_side).
  const bool side_by_side = P > 1 && !cross_warp && lanes >= P;
  const bool symmetric = a.kind == QuantizerKind::kSymmetric;
  const QuantParams qp{a.bits, a.kind, false, kWide && a.wide_groups};
  const bool rotation = kRotation && a.rotate;  // uniform over the grid
  RotationLane rl{false, lanes, 0u, 1.0f, 1.0f};
  if (rotation) {
    rl.sign_bits = rotation_sign_bits<E>(static_cast<int>(threadIdx.x) & (lanes - 1));
    rl.forward_factor = numerics::hadamard_forward_factor(a.group);
    rl.inverse_factor = numerics::hadamard_inverse_factor(a.group);
  }
  const Scaling sc = call_scaling(a);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    a.report->scale_exponent = sc.k;
    a.report->exact_path = 0;
  }
  bool aligned[P];
#pragma unroll
  for (int r = 0; r < P; ++r) aligned[r] = lane_aligned<D, E>(rank_row<D>(a, r));
  const bool out_aligned = lane_aligned<D, E>(a.out);
  const std::size_t chunks = (a.count + kChunk - 1) / kChunk;
  for (std::size_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
    const LaneSpot s = lane_spot<P>(a, chunk);
    float x[P][E];
    load_ranks<kBatch, D, P, E, kStream>(a, s, fresh, aligned, x);
    // The rotation's instantiation's sent terms: x' (times 2^k), rotated where the group is full
    // (the message's partial last group is not).
    float xs[P][E];
    if constexpr (kRotation) {
      rl.rotate = rotation && (s.e0 & ~static_cast<std::size_t>(a.group - 1)) + a.group <= a.count;
#pragma unroll
      for (int r = 0; r < P; ++r) {
        scaled_terms(a, sc, x[r], xs[r]);
        if (rotation) rotate_lane<E>(rl, xs[r], rotation_exchange);
      }
    }
    // Push and reduce: rank r's term is its dequantized push where it does not own the group,
    // its own x' (times 2^k) where it does; acc sums the terms in rank order.
    float acc[E];
    if (side_by_side) {
      push_maps_side_by_side<P, kWide, kRotation, kStream>(a, s, qp, sc, lanes, symmetric, local, rotation, rl,
                                                  rotation_exchange, x, xs, acc);
    } else {
#pragma unroll
      for (int r = 0; r < P; ++r) {
        float v[E];
        send_term<kRotation, P>(a, sc, x, xs, r, v);
        const bool pushes = s.valid > 0 && r != s.owner;
        // The statistics take every lane of the group (shuffles, barriers when cross-warp): skipped
        // only where no lane of the warp pushes (then the whole warp skips: a warp holds whole
        // groups or lies inside one).
        if (P > 1 && (cross_warp || __any_sync(0xFFFFFFFFu, pushes))) {
          const GroupStats st = block_group_stats(v, s.valid, lanes, warp_stats);
          if (pushes) {
            requantize_lane<E, kWide>(group_map_of<kWide>(qp, st.mn, st.mx, st.finite), symmetric, a.bits, v, v);
            if constexpr (!kRotation) {
              if (local) update_pushed(a, r, s, sc, x[r], v);
            }
          }
          if constexpr (kRotation) {
            if (local) update_pushed_term<kStream>(a, r, s, sc, pushes, rotation, rl, rotation_exchange, x[r], v);
          }
        }
#pragma unroll
        for (int k = 0; k < E; ++k) acc[k] = r == 0 ? v[k] : __fadd_rn(acc[k], v[k]);
      }
    }
    // Gather: the owner quantizes the sum once; every rank dequantizes the same codes.
    const GroupStats st = block_group_stats(acc, s.valid, lanes, warp_stats);
    const GroupMap map = group_map_of<kWide>(qp, st.mn, st.mx, st.finite);
    if (s.valid > 0 && s.group_head && map.poisoned) atomicAdd(&a.report->poisoned_groups, 1ull);
    float y[E];
    requantize_lane<E, kWide>(map, symmetric, a.bits, acc, y);
    if constexpr (kRotation) {
      // Every rank de-rotates the gathered values; the local residual takes the owner's sum
      // de-rotated too (every lane of the group, before the lanes past the end leave).
      if (rotation) {
        unrotate_lane<E>(rl, y, rotation_exchange);
        if (local) unrotate_lane<E>(rl, acc, rotation_exchange);
      }
    }
    if (a.backward) {
#pragma unroll
      for (int k = 0; k < E; ++k) y[k] = __fmul_rn(y[k], sc.unscale);
    }
    float delivered[E];  // dtype_rne(y) as a float
    store_lane<D>(a.out, s.e0, s.valid, out_aligned, y, delivered);
    if (!comp || s.valid == 0) continue;
    if (local) {
      // Local residual of the owner: its gather error, u = acc * 2^-k - y.
#pragma unroll
      for (int r = 0; r < P; ++r) {
        if (r != s.owner) continue;
        float u[E];
#pragma unroll
        for (int k = 0; k < E; ++k) u[k] = __fsub_rn(a.backward ? __fmul_rn(acc[k], sc.unscale) : acc[k], delivered[k]);
        update_rank<E, kStream>(a, r, s, u);
      }
    } else {
      update_global<kBatch, P, E, kStream>(a, s, x, delivered);
    }
  }
}

// Rank r's term of the exact path: x' (times 2^k backward), rounded to bf16 where the call rounds
// (echo::exact_path_rounds_x_prime: forward bf16).
template <int E>
__device__ __forceinline__ void exact_term(const EmulateParams& a, const Scaling& sc, const float (&x)[E],
                                           float (&t)[E]) {
#pragma unroll
  for (int k = 0; k < E; ++k) {
    t[k] = a.backward ? __fmul_rn(x[k], sc.scale) : x[k];
    if (a.exact_rounds) t[k] = round_to<DType::kBFloat16>(t[k]);
  }
}

// The exact small-message path (docs/numerics.md 4, "Exact path"); compensator units 'stream' where
// the call brings its rows' gains.
template <DType D, int P>
__global__ void __launch_bounds__(kBlockThreads) emulate_exact_kernel(EmulateParams a) {
  __shared__ int warp_flags[kWarpsPerBlock];
  const bool comp = a.comp.mode != CompensatorMode::kOff;
  const bool local = comp && a.comp.residual == ResidualMode::kLocal;
  const bool fresh = comp && *a.comp.fresh != 0;
  const int lanes = a.group / E;
  const Scaling sc = call_scaling(a);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    a.report->scale_exponent = sc.k;
    a.report->exact_path = 1;
  }
  bool aligned[P];
#pragma unroll
  for (int r = 0; r < P; ++r) aligned[r] = lane_aligned<D, E>(rank_row<D>(a, r));
  const bool out_aligned = lane_aligned<D, E>(a.out);
  const std::size_t chunks = (a.count + kChunk - 1) / kChunk;
  for (std::size_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
    const LaneSpot s = lane_spot<P>(a, chunk);
    float x[P][E];
    load_ranks<kSerialLoads, D, P, E, true>(a, s, fresh, aligned, x);
    float acc[E];
    bool bad = false;  // a term of the lane is not finite: its group is reported poisoned
#pragma unroll
    for (int r = 0; r < P; ++r) {
      float t[E];
      exact_term(a, sc, x[r], t);
#pragma unroll
      for (int k = 0; k < E; ++k) {
        if (k < s.valid) bad = bad || !is_finite(t[k]);
        acc[k] = r == 0 ? t[k] : __fadd_rn(acc[k], t[k]);
      }
    }
    if (block_group_any(bad, lanes, warp_flags) && s.valid > 0 && s.group_head) {
      atomicAdd(&a.report->poisoned_groups, 1ull);
    }
    float y[E];
#pragma unroll
    for (int k = 0; k < E; ++k) y[k] = a.backward ? __fmul_rn(acc[k], sc.unscale) : acc[k];
    float delivered[E];
    store_lane<D>(a.out, s.e0, s.valid, out_aligned, y, delivered);
    if (!comp || s.valid == 0) continue;
    if (local) {
      // The owner's term acc * 2^-k - y on its own segment, 0 elsewhere; where the terms are
      // rounded, every rank's rounding error x' - s_i comes first.
      float own[E];
#pragma unroll
      for (int k = 0; k < E; ++k) own[k] = __fsub_rn(a.backward ? __fmul_rn(acc[k], sc.unscale) : acc[k], delivered[k]);
#pragma unroll
      for (int r = 0; r < P; ++r) {
        float t[E];
        exact_term(a, sc, x[r], t);
        float u[E];
#pragma unroll
        for (int k = 0; k < E; ++k) {
          if (a.exact_rounds) {
            const float rounding = __fsub_rn(x[r][k], t[k]);
            u[k] = r == s.owner ? __fadd_rn(rounding, own[k]) : rounding;
          } else {
            u[k] = r == s.owner ? own[k] : 0.0f;
          }
        }
        update_rank<E, true>(a, r, s, u);
      }
    } else {
      update_global<kSerialLoads, P, E, true>(a, s, x, delivered);
    }
  }
}

inline unsigned grid_of(std::size_t count, std::size_t cap) {
  const std::size_t chunks = (count + kChunk - 1) / kChunk;
  return static_cast<unsigned>(chunks < cap ? (chunks < 1 ? 1 : chunks) : cap);
}

// One block per block iteration (the grid-stride loops only matter past 2^31 - 1 of them).
constexpr std::size_t kMainGridCap = 0x7FFFFFFF;

template <DType D, int P>
cudaError_t launch_main(bool exact, const EmulateParams& p, cudaStream_t stream) {
  const unsigned grid = grid_of(p.count, kMainGridCap);
  if (exact) {
    emulate_exact_kernel<D, P><<<grid, kBlockThreads, 0, stream>>>(p);
  } else if (p.rotate || p.stream_gains != nullptr || p.comp.mode == CompensatorMode::kDeficit) {
    // Mode 'deficit' runs here at every site (the other instantiations compile the paper's modes
    // alone, lane_ops.cuh).
    emulate_quantized_kernel<D, P, kAllOptions | kOptionStream><<<grid, kBlockThreads, 0, stream>>>(p);
  } else if (p.wide_groups) {
    emulate_quantized_kernel<D, P, kOptionWide><<<grid, kBlockThreads, 0, stream>>>(p);
  } else {
    emulate_quantized_kernel<D, P, kNoOptions><<<grid, kBlockThreads, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

template <DType D>
cudaError_t launch_ranks(bool exact, const EmulateParams& p, cudaStream_t stream) {
  switch (p.ranks) {
    case 1: return launch_main<D, 1>(exact, p, stream);
    case 2: return launch_main<D, 2>(exact, p, stream);
    case 3: return launch_main<D, 3>(exact, p, stream);
    case 4: return launch_main<D, 4>(exact, p, stream);
    case 5: return launch_main<D, 5>(exact, p, stream);
    case 6: return launch_main<D, 6>(exact, p, stream);
    case 7: return launch_main<D, 7>(exact, p, stream);
    case 8: return launch_main<D, 8>(exact, p, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace emulate_detail

// The call's main kernel for dtype D, its P dispatched here.
template <DType D>
cudaError_t emulate_launch(bool exact, const EmulateParams& p, cudaStream_t stream) {
  return emulate_detail::launch_ranks<D>(exact, p, stream);
}

}  // namespace echo::cuda
