// Each rank's lane in the one-GPU emulation (emulate/allreduce.cuh): where the lane lies in the
// message, its loads and x' = x + c (a batch of ranks' loads at a time, per dtype), and its
// compensator update from its residual (local, or global from the delivered output). kStream: an
// instantiation that serves compensator units 'stream' (docs/numerics.md 6.1) where the call brings
// its rows' gains (EmulateParams::stream_gains), the paper's units where it does not, and mode
// 'deficit' (6.2) either way; the other instantiations serve the paper's modes alone.
#pragma once

#include "echo/numerics/deficit_loop.h"
#include "echo/numerics/stream_units.h"
#include "emulate_args.h"
#include "kernels/emulate/lanes.cuh"

namespace echo::cuda {
namespace emulate_detail {

using namespace device;

constexpr int E = kEmulateLane;
constexpr int kChunk = kBlockThreads * E;  // elements per block iteration
static_assert(kChunk % kMaxGroup == 0, "every group lies inside one block iteration");

// Where a thread's lane lies in the message.
struct LaneSpot {
  std::size_t e0;   // first element
  int valid;        // elements inside the message (0 past its end)
  int owner;        // rank whose segment holds the lane's group
  bool group_head;  // first lane of its group
};

// The group size is a power of two (group_shift its log2), so the group of an element is a shift;
// the owner counts the segment starts at or below the group (no 64-bit division per lane).
template <int P>
__device__ __forceinline__ LaneSpot lane_spot(const EmulateParams& a, std::size_t chunk) {
  LaneSpot s;
  s.e0 = chunk * kChunk + static_cast<std::size_t>(threadIdx.x) * E;
  s.valid = s.e0 >= a.count ? 0 : (a.count - s.e0 < static_cast<std::size_t>(E) ? static_cast<int>(a.count - s.e0) : E);
  const std::size_t grp = s.e0 >> a.group_shift;
  s.owner = 0;
#pragma unroll
  for (int r = 1; r < P; ++r) s.owner += grp >= static_cast<std::size_t>(r) * a.groups_per_segment ? 1 : 0;
  s.group_head = (s.e0 & static_cast<std::size_t>(a.group - 1)) == 0;
  return s;
}

template <DType D>
__device__ __forceinline__ const void* rank_row(const EmulateParams& a, int r) {
  return static_cast<const typename Elem<D>::T*>(a.parts) + static_cast<std::size_t>(r) * a.count;
}

// Stream units: rank r's terms of each element of the lane at s: the gains of the row holding it
// (unit gains past the message's end; in mode 'deficit' from_stream is the row's estimate e), and
// where the call has them the feature's term (profile 'sqrt''s factor f_j, or mode 'deficit''s
// floored weight wf_j) and the row's clip bound (1 and 0 where it does not: unused). A row may end
// inside the lane.
template <int E>
struct RowTerms {
  numerics::StreamGains gains[E];
  float factor[E];
  float bound[E];
};

template <int E>
__device__ __forceinline__ void lane_row_terms(const EmulateParams& a, int r, const LaneSpot& s, RowTerms<E>& t) {
  const std::size_t rank_rows = static_cast<std::size_t>(r) * a.stream_rows;
  // The call has one kind of per-feature term at most (mode 'deficit' runs with profile 'flat').
  const float* per_feature = a.profile_factors != nullptr ? a.profile_factors : a.deficit_weights;
  std::size_t row = s.e0 / a.row_length;
  std::size_t within = s.e0 - row * a.row_length;
#pragma unroll
  for (int k = 0; k < E; ++k) {
    const bool inside = k < s.valid;
    t.gains[k] = inside ? a.stream_gains[rank_rows + row] : numerics::unit_gains();
    t.factor[k] = inside && per_feature != nullptr ? per_feature[within] : 1.0f;
    t.bound[k] = inside && a.clip_bounds != nullptr ? a.clip_bounds[rank_rows + row] : 0.0f;
    if (++within == a.row_length) {
      within = 0;
      ++row;
    }
  }
}

// The stream units' correction of one element of the lane (t: its rank's terms, k its place in the
// lane), before x' = fp32(x + c): numerics 6.1 steps 4, 6, 7, c = fp32(c0 * R), c0 the correction
// of numerics 6, then fp32(c / f_j) with the profile; in mode 'deficit' numerics 6.2's apply,
// c = fp32(fp32(eta * A) * R_j) with R_j = fp32(e / wf_j); then the clamp to the row's bound with a
// clip.
template <int E>
__device__ __forceinline__ float stream_correction(const EmulateParams& a, const RowTerms<E>& t, int k, float m1,
                                                   float m2) {
  float c;
  if (a.deficit_weights != nullptr) {
    c = numerics::deficit_site_correction(a.comp.eta, m1,
                                          numerics::deficit_from_stream(t.gains[k].from_stream, t.factor[k]));
  } else {
    c = numerics::from_stream(correction<true>(a.comp, m1, m2), t.gains[k].from_stream);
    if (a.profile_factors != nullptr) c = numerics::from_profile(c, t.factor[k]);
  }
  if (a.clip_bounds != nullptr) c = numerics::clip_correction(c, t.bound[k]);
  return c;
}

// Stream units' apply: x' = fp32(x + c) with c the stream correction above. A fresh state applies
// nothing, as apply_compensation.
template <int E>
__device__ __forceinline__ void apply_in_stream_units(const EmulateParams& a, int r, const LaneSpot& s, bool fresh,
                                                      const float (&m1)[E], const float (&m2)[E], float (&x)[E]) {
  if (fresh) return;
  RowTerms<E> t;
  lane_row_terms<E>(a, r, s, t);
#pragma unroll
  for (int k = 0; k < E; ++k) x[k] = numerics::compensate(x[k], stream_correction<E>(a, t, k, m1[k], m2[k]));
}

// Rank r's x' from its averages: in stream units where the instantiation serves them and the call
// brings its gains, else numerics 6's (and mode 'deficit''s without a post-norm, which the stream
// instantiation serves too).
template <bool kStream, int E>
__device__ __forceinline__ void apply_rank(const EmulateParams& a, int r, const LaneSpot& s, bool fresh,
                                           const float (&m1)[E], const float (&m2)[E], float (&x)[E]) {
  if constexpr (kStream) {
    if (a.stream_gains != nullptr) {
      apply_in_stream_units<E>(a, r, s, fresh, m1, m2, x);
      return;
    }
  }
  apply_compensation<E, kStream>(a.comp, fresh, m1, m2, x);
}

// Ranks whose lane loads (input and averages) are issued together before any of them is used: the
// loads of a batch are in flight at once instead of one rank's after another's arithmetic, and a
// batch's averages hold 2 E registers per rank. Against that, the registers a thread holds set how
// many blocks a multiprocessor keeps resident. The quantized kernel without the options (and the
// one with wide groups alone, the default spec's, in the same structure), per input dtype
// (docs/performance.md, "One-GPU emulation", measured side by side on one H200):
// - bf16 and fp16: one rank at a time, with launch bounds that ask for four blocks per
//   multiprocessor (64 registers, no spill at P = 4): 0.604 of a copy's bandwidth on the speed
//   goal's row against 0.583 with two ranks and the compiler's choice (80 registers, three
//   blocks), and faster on every other row of 16-bit inputs (the uncompensated and
//   local-residual rows by 15-16%);
// - fp32: two ranks, the compiler's choice of registers: 0.615 against 0.591 the other way (its
//   loads are twice as wide, so more of them in flight pays more than residency).
// ECHO_EMULATE_LOAD_BATCH and ECHO_EMULATE_MIN_BLOCKS override both for every dtype, to compare
// alternatives on a GPU (scripts/emulate_gpu_check.sh, stage batch-ab); the instantiation with
// wide groups alone takes them too. The rotation's instantiation and the exact kernel keep the
// loop of one rank at a time (kSerialLoads) and the compiler's choice of registers: batched, they
// need up to 177 and 127 registers, and even the batch loop run with one rank made the rotation's
// spill at P = 8.
constexpr int kSerialLoads = 1;

template <DType D>
constexpr int quantized_load_batch() {
#ifdef ECHO_EMULATE_LOAD_BATCH
  return ECHO_EMULATE_LOAD_BATCH;
#else
  return D == DType::kFloat32 ? 2 : 1;
#endif
}

// Blocks of kBlockThreads per multiprocessor that the quantized kernel's registers must allow
// (its launch bounds; 0 leaves the choice to the compiler, the same machine code as launch bounds
// without that argument). kRotation: the rotation's instantiation.
template <DType D, bool kRotation>
constexpr int quantized_min_blocks() {
#ifdef ECHO_EMULATE_MIN_BLOCKS
  return kRotation ? 0 : ECHO_EMULATE_MIN_BLOCKS;
#else
  return kRotation || D == DType::kFloat32 ? 0 : 4;
#endif
}

// Rank r's averages of the lane at s.
template <int E>
__device__ __forceinline__ void load_rank_state(const EmulateParams& a, int r, const LaneSpot& s, float (&m1)[E],
                                                float (&m2)[E]) {
  load_state<E>(a.comp, static_cast<std::size_t>(r) * a.state_stride + s.e0, s.valid, m1, m2);
}

// Ranks in a batch of kBatch of P.
template <int kBatch, int P>
constexpr int batch_ranks() { return P < kBatch ? P : kBatch; }

// The averages of the batch of ranks from b (at most kBatch of them), loaded together.
template <int kBatch, int P, int E>
__device__ __forceinline__ void load_batch_states(const EmulateParams& a, const LaneSpot& s, int b,
                                                  float (&m1)[batch_ranks<kBatch, P>()][E],
                                                  float (&m2)[batch_ranks<kBatch, P>()][E]) {
#pragma unroll
  for (int r = b; r < P && r < b + kBatch; ++r) load_rank_state<E>(a, r, s, m1[r - b], m2[r - b]);
}

// Every rank's x' of the lane (gradient units); also the optional x' output. The loads of a batch
// of ranks come first, then their compensation, then their x' stores.
// The state x' was formed from is not kept: update_rank loads it again (from cache), which leaves
// the registers of P ranks' averages free for the quantization.
// Stream units are served by the loop of one rank at a time (kBatch 1).
template <int kBatch, DType D, int P, int E, bool kStream = false>
__device__ __forceinline__ void load_ranks(const EmulateParams& a, const LaneSpot& s, bool fresh,
                                           const bool (&aligned)[P], float (&x)[P][E]) {
  static_assert(!kStream || kBatch == 1, "stream units load one rank at a time");
  const bool comp = a.comp.mode != CompensatorMode::kOff;
  if constexpr (kBatch == 1) {
#pragma unroll
    for (int r = 0; r < P; ++r) {
      load_lane<D>(rank_row<D>(a, r), s.e0, s.valid, aligned[r], x[r]);
      if (comp) {
        float m1[E], m2[E];
        load_rank_state<E>(a, r, s, m1, m2);
        apply_rank<kStream, E>(a, r, s, fresh, m1, m2, x[r]);
      }
      if (a.compensated != nullptr && s.valid > 0) {
        store_lane_f32_canonical(a.compensated + static_cast<std::size_t>(r) * a.count + s.e0, s.valid, x[r]);
      }
    }
  } else {
#pragma unroll
    for (int b = 0; b < P; b += kBatch) {
      float m1[batch_ranks<kBatch, P>()][E], m2[batch_ranks<kBatch, P>()][E];
#pragma unroll
      for (int r = b; r < P && r < b + kBatch; ++r) load_lane<D>(rank_row<D>(a, r), s.e0, s.valid, aligned[r], x[r]);
      if (comp) {
        load_batch_states<kBatch, P, E>(a, s, b, m1, m2);
#pragma unroll
        for (int r = b; r < P && r < b + kBatch; ++r) apply_compensation<E>(a.comp, fresh, m1[r - b], m2[r - b], x[r]);
      }
      if (a.compensated != nullptr && s.valid > 0) {
#pragma unroll
        for (int r = b; r < P && r < b + kBatch; ++r) {
          store_lane_f32_canonical(a.compensated + static_cast<std::size_t>(r) * a.count + s.e0, s.valid, x[r]);
        }
      }
    }
  }
}

// Mode 'deficit' at a post-norm site (numerics 6.2): the undelivered part d = fp32(u - c) of rank r's
// lane at s, c the correction its apply gave (recomputed from the averages m1 it read, after the
// clip; 0 where the state is fresh, as the apply gave none).
template <int E>
__device__ __forceinline__ void undelivered_parts(const EmulateParams& a, int r, const LaneSpot& s,
                                                  const float (&u)[E], const float (&m1)[E], const float (&m2)[E],
                                                  float (&d)[E]) {
  const bool fresh = *a.comp.fresh != 0;
  RowTerms<E> t;
  lane_row_terms<E>(a, r, s, t);
#pragma unroll
  for (int k = 0; k < E; ++k) {
    d[k] = numerics::undelivered(u[k], fresh ? 0.0f : stream_correction<E>(a, t, k, m1[k], m2[k]));
  }
}

// Rank r's new averages from its residual u and its averages m1, m2 (loaded again), stored (lanes
// inside the message only). Stream units (numerics 6.1 steps 5, 6): the averages take fp32(u * G),
// times f_j with the profile; with gains 'sum' (step 8) u is left in p.sum_residuals instead, and
// in mode 'deficit' (6.2) its undelivered part d = fp32(u - c).
template <int E, bool kStream = false>
__device__ __forceinline__ void update_loaded(const EmulateParams& a, int r, const LaneSpot& s, const float (&u)[E],
                                              float (&m1)[E], float (&m2)[E]) {
  if constexpr (kStream) {
    if (a.sum_residuals != nullptr) {
      // Gains 'sum': G needs the delivered rows' RMS, so the update waits for emulate_sum_update.
      float* left = a.sum_residuals + static_cast<std::size_t>(r) * a.state_stride + s.e0;
      if (a.deficit_weights != nullptr) {
        float d[E];
        undelivered_parts<E>(a, r, s, u, m1, m2, d);
        store_f32<E>(left, s.valid, d);
        return;
      }
      store_f32<E>(left, s.valid, u);
      return;
    }
    if (a.stream_gains != nullptr) {
      RowTerms<E> t;
      lane_row_terms<E>(a, r, s, t);
      float us[E];
#pragma unroll
      for (int k = 0; k < E; ++k) {
        us[k] = numerics::to_stream(u[k], t.gains[k].to_stream);
        if (a.profile_factors != nullptr) us[k] = numerics::to_profile(us[k], t.factor[k]);
      }
      update_state<E, kStream>(a.comp, us, m1, m2);
      store_state_lane<E>(a.comp, static_cast<std::size_t>(r) * a.state_stride + s.e0, s.valid, m1, m2);
      return;
    }
  }
  update_state<E, kStream>(a.comp, u, m1, m2);
  store_state_lane<E>(a.comp, static_cast<std::size_t>(r) * a.state_stride + s.e0, s.valid, m1, m2);
}

// The same for one rank, its averages loaded here.
template <int E, bool kStream = false>
__device__ __forceinline__ void update_rank(const EmulateParams& a, int r, const LaneSpot& s, const float (&u)[E]) {
  float m1[E], m2[E];
  load_rank_state<E>(a, r, s, m1, m2);
  update_loaded<E, kStream>(a, r, s, u, m1, m2);
}

// Global residual (docs/numerics.md 6): u_i = x'_i - y / P for every rank, y the delivered output.
// A batch's averages are loaded together before its first update's stores (as in load_ranks).
template <int kBatch, int P, int E, bool kStream = false>
__device__ __forceinline__ void update_global(const EmulateParams& a, const LaneSpot& s, const float (&x)[P][E],
                                              const float (&y)[E]) {
  static_assert(!kStream || kBatch == 1, "stream units update one rank at a time");
  // For a power-of-two P the product with 1 / P (exact) is the same correctly rounded quotient.
  constexpr bool kPow2 = (P & (P - 1)) == 0;
  float share[E];
#pragma unroll
  for (int k = 0; k < E; ++k) {
    share[k] = kPow2 ? __fmul_rn(y[k], 1.0f / static_cast<float>(P)) : __fdiv_rn(y[k], static_cast<float>(P));
  }
  if constexpr (kBatch == 1) {
#pragma unroll
    for (int r = 0; r < P; ++r) {
      float u[E];
#pragma unroll
      for (int k = 0; k < E; ++k) u[k] = __fsub_rn(x[r][k], share[k]);
      update_rank<E, kStream>(a, r, s, u);
    }
  } else {
#pragma unroll
    for (int b = 0; b < P; b += kBatch) {
      float m1[batch_ranks<kBatch, P>()][E], m2[batch_ranks<kBatch, P>()][E];
      load_batch_states<kBatch, P, E>(a, s, b, m1, m2);
#pragma unroll
      for (int r = b; r < P && r < b + kBatch; ++r) {
        float u[E];
#pragma unroll
        for (int k = 0; k < E; ++k) u[k] = __fsub_rn(x[r][k], share[k]);
        update_loaded(a, r, s, u, m1[r - b], m2[r - b]);
      }
    }
  }
}

}  // namespace emulate_detail
}  // namespace echo::cuda
