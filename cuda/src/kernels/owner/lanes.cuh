// The context every stage of the owner kernel works in: one call's arguments and the values the
// stages derive from them once per launch, and the lane work they share (lane groups, lean tiles,
// input words and staged copies, x' of a lane, quantizing a lane). The stages are members defined
// in push.cuh, reduce.cuh and tail.cuh; the variant's policy (variant.cuh) picks the loads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernel_args.h"
#include "kernels/owner/job_trace.cuh"
#include "kernels/owner/tiles.cuh"
#include "kernels/owner/variant.cuh"
#include "device/hadamard_lanes.cuh"
#include "device/lane_ops.cuh"
#include "device/staged_loads.cuh"

namespace echo::cuda {
namespace owner_detail {

using namespace device;

// V: the variant's policy (OwnerVariant).
template <class V>
struct OwnerStages {
  static constexpr DType D = V::kDType;
  static constexpr int BITS = V::kBits;
  static constexpr int E = V::kLaneElements;
  static constexpr bool COMP = V::kCompensated;
  static constexpr bool kPrefetch = V::kPrefetch;
  static constexpr int kPeerBatch = V::kPeerBatch;
  static constexpr bool kStaged = V::kStaged;
  static constexpr int kStagedStateBytes = V::kStagedStateBytes;
  static constexpr bool kLeanVariant = V::kLeanVariant;
  static constexpr bool kOptions = V::kOptions;
  static constexpr bool kRotationOption = V::kRotationOption;
  using Codes = PackedCodes<BITS, E>;
  using Input = InputWords<D, E>;
  using Staged = StagedLane<D, E, kStagedStateBytes>;
  const CallArgs& a;
  unsigned long long epoch;
  Scaling sc;
  bool fresh;
  bool symmetric;
  bool in_aligned;
  bool out_aligned;
  std::size_t group_bytes;  // packed codes of one group
  LaneMap<E> lm;
  Staged staged;

  __device__ OwnerStages(const CallArgs& args, unsigned long long ep, Scaling scaling, uint4* smem)
      : a(args), epoch(ep), sc(scaling), lm(args.group), staged{smem} {
    fresh = COMP && *a.comp.fresh != 0;
    symmetric = a.kind == QuantizerKind::kSymmetric;
    in_aligned = (reinterpret_cast<std::uintptr_t>(a.in) & 15u) == 0;
    out_aligned = (reinterpret_cast<std::uintptr_t>(a.out) & 15u) == 0;
    group_bytes = static_cast<std::size_t>(a.group) * BITS / 8;
  }

  // LEAN (a lean tile, lean_tile()): every lane is active and whole.
  template <int LE, bool LEAN = false>
  __device__ __forceinline__ LaneGroup lane_group_of(const LaneMap<LE>& m, std::size_t base, std::size_t end) const {
    LaneGroup g;
    g.grp = base + m.group_slot;
    g.e0 = g.grp * a.group + static_cast<std::size_t>(m.lane_in_group) * LE;
    if constexpr (LEAN) {
      g.active = true;
      g.valid = LE;
    } else {
      g.active = g.grp < end;
      g.valid = 0;
      if (g.active && g.e0 < a.count) {
        const std::size_t left = a.count - g.e0;
        g.valid = left < static_cast<std::size_t>(LE) ? static_cast<int>(left) : LE;
      }
    }
    return g;
  }
  template <bool LEAN = false>
  __device__ __forceinline__ LaneGroup lane_group(std::size_t base, std::size_t end) const {
    return lane_group_of<E, LEAN>(lm, base, end);
  }


  // Lean tiles: whole block iterations of whole groups inside the message, staging buffers (in the
  // staged variants) that hold the call's state, aligned input (and output, for the reduce),
  // forward, no x' output. Their push and reduce run a copy of the loop with every per-lane
  // condition known (the same operations in the same order, so the same bits), which issues fewer
  // instructions than the general loop (docs/performance.md, "Lean tiles"); V::kLeanVariant says
  // which variants have the copy.
  __device__ __forceinline__ bool lean_tile(const TileRange& tr, bool reduce) const {
    return (!kStaged || Staged::holds(a.comp)) && in_aligned && (out_aligned || !reduce) && !a.backward &&
           a.compensated == nullptr && (tr.end - tr.first) % lm.groups_per_block == 0 &&
           tr.end * a.group <= a.count;
  }

  // The input words of the block iteration at `base` of a tile ending at `end`: with prefetching,
  // the ones `next` already holds (and `next` is reloaded for the following iteration); without,
  // loaded now. `next` starts with first_input().
  template <bool LEAN = false>
  __device__ __forceinline__ Input first_input(const TileRange& tr) const {
    Input in;
    if (kPrefetch) in.load(a.in, lane_group<LEAN>(tr.first, tr.end), LEAN || in_aligned);
    return in;
  }
  template <bool LEAN = false>
  __device__ __forceinline__ Input take_input(std::size_t base, std::size_t end, const LaneGroup& g,
                                              Input& next) const {
    Input cur = next;
    if (staged_lane<LEAN>(g)) {
      cur.fast = false;  // from the staging buffers (entry)
    } else if (!kPrefetch) {
      cur.load(a.in, g, LEAN || in_aligned);
    } else if (base + lm.groups_per_block < end) {
      next.load(a.in, lane_group<LEAN>(base + lm.groups_per_block, end), LEAN || in_aligned);
    }
    return cur;
  }

  // Values the quantizer sees: x' times 2^k in backward mode, x' itself otherwise.
  template <bool LEAN = false>
  __device__ __forceinline__ void scaled(const float (&x)[E], float (&xs)[E]) const {
#pragma unroll
    for (int k = 0; k < E; ++k) xs[k] = !LEAN && a.backward ? __fmul_rn(x[k], sc.scale) : x[k];
  }


  // Staged variants: whole, aligned lanes of a call whose state the buffers hold take their input
  // and state from them.
  template <bool LEAN = false>
  __device__ __forceinline__ bool staged_lane(const LaneGroup& g) const {
    return kStaged && (LEAN || (Staged::holds(a.comp) && g.active && g.valid == E && in_aligned));
  }
  // Staged variants: the copies of the block iteration at `base` into buffer `buf`.
  template <bool LEAN = false, int CONFIG = kConfigAny>
  __device__ __forceinline__ void stage(std::size_t base, std::size_t end, int buf) const {
    if constexpr (kStaged) {
      const LaneGroup n = lane_group<LEAN>(base, end);
      staged.issue(staged_lane<LEAN>(n), a.in, configured<CONFIG>(a.comp), n.e0, buf);
    }
  }
  // Staged variants, at the top of the iteration at `base` that reads buffer `buf`: the next
  // iteration's copies go out into the other buffer, then this one's are waited for.
  template <bool LEAN = false, int CONFIG = kConfigAny>
  __device__ __forceinline__ void stage_next(std::size_t base, std::size_t end, int buf) const {
    if constexpr (kStaged) {
      if (base + lm.groups_per_block < end) {
        stage<LEAN, CONFIG>(base + lm.groups_per_block, end, buf ^ 1);
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
    }
  }

  // x' of a lane (gradient units) with the state it was formed from; also the global-mode stash
  // and the optional x' output.
  template <bool LEAN = false>
  __device__ __forceinline__ void entry(const CompensatorArgs& c, const LaneGroup& g, const Input& in, int buf,
                                        float (&x)[E], float (&m1)[E], float (&m2)[E]) {
    const bool from_stage = staged_lane<LEAN>(g);
    if (from_stage) {
      staged.read(c, buf, x, m1, m2);
    } else {
      in.to_float(a.in, g, x);
    }
    if constexpr (COMP) {
      if (c.residual == ResidualMode::kGlobal) store_elems<D, E>(c.stash, g.e0, g.valid, true, x);
      if (!from_stage) load_state<E>(c, g.e0, g.valid, m1, m2);
      apply_compensation<E>(c, fresh, m1, m2, x);
    }
    if (!LEAN && a.compensated != nullptr) store_f32_canonical<E>(a.compensated + g.e0, g.valid, x);
  }

  // Whether this call's lean tiles run the copies compiled for kConfigDualLocalBf16 (kernel_args.h):
  // the dual compensator with the local residual and bf16 state, the configuration whose HBM floor
  // leaves room for the compensated target (docs/performance.md, "Kernels compiled per
  // configuration"). Spelled out rather than as compensator_config(a.comp) == kConfigDualLocalBf16,
  // which adds 8 instructions to the fused 8-element kernels.
  __device__ __forceinline__ bool dual_local_bf16() const {
    return COMP && E == 8 && a.comp.mode == CompensatorMode::kDual && a.comp.residual == ResidualMode::kLocal &&
           a.comp.bf16_state;
  }

  // Codes of a lane's values under a group map: encode (a wide map, in an instance compiling the
  // options, by its own rule), zero codes past the message end and in poisoned groups (the reference
  // writes 0 there), pack. `bits` keeps each code's fp32(t + magic).
  __device__ __forceinline__ void quantize_lane(const GroupMap& map, const float (&v)[E], int valid,
                                                unsigned (&bits)[E], Codes& codes) const {
    if (kOptions && map.wide) {
      encode_lane_wide<E>(map, v, bits);
    } else {
      const float magic = encode_magic(map);
#pragma unroll
      for (int k = 0; k < E; ++k) bits[k] = encode_bits(map, magic, v[k]);
    }
    if (!map.poisoned && valid == E) {
      codes.pack(bits);
      return;
    }
    unsigned b[E];
#pragma unroll
    for (int k = 0; k < E; ++k) b[k] = (map.poisoned || k >= valid) ? 0u : bits[k];
    codes.pack(b);
  }

  // Rotation (docs/numerics.md 2.6): whether the lane's group is rotated, the instance compiling
  // the rotation (kAllOptions), the call rotating and the group being a full one of the message (a
  // partial last group is not). Uniform over the group's lanes, so it may enclose the rotation's
  // shuffles.
  template <bool LEAN = false>
  __device__ __forceinline__ bool rotated_group(const LaneGroup& g) const {
    return kRotationOption && a.rotation && (LEAN || (g.active && (g.grp + 1) * static_cast<std::size_t>(a.group) <= a.count));
  }

  // The job trace's recorder (job_trace.cuh): an empty policy unless ECHO_CUDA_JOB_TRACE.
  JobRecorder rec;

  // The stages (push.cuh, reduce.cuh, tail.cuh); a false return means a peer wait failed.
  __device__ void push(int dest, int tile);
  template <bool LEAN, int CONFIG = kConfigAny>
  __device__ __forceinline__ void push_tile(int dest, int tile, const TileRange& tr);
  __device__ __forceinline__ void load_copy(int r, std::size_t lg, Codes& c, unsigned& w) const;
  __device__ __forceinline__ void sum_copies(const LaneGroup& g, std::size_t lg, const float (&xs)[E],
                                             float (&acc)[E]) const;
  __device__ bool reduce(int tile);
  template <bool LEAN>
  __device__ __forceinline__ bool rotated_output_of(const CompensatorArgs& c, const LaneGroup& g, const Codes& codes,
                                                    const DecodeParams& dp, float (&y)[E]) const;
  template <bool LEAN>
  __device__ __forceinline__ void owner_residual(const CompensatorArgs& c, const LaneGroup& g, const float (&acc)[E],
                                                 const float (&y)[E], float (&m1)[E], float (&m2)[E]) const;
  template <bool LEAN, int CONFIG = kConfigAny>
  __device__ __forceinline__ bool reduce_tile(int tile, const TileRange& tr);
  __device__ __forceinline__ void prefetch_slot(const unsigned char* slot, std::size_t lg_base, std::size_t it,
                                                std::size_t end, int groups_per_block) const;
  __device__ bool tail(int owner, int tile);
  template <int kTailE>
  __device__ bool tail_lanes(int owner, int tile);
  template <int kTailE, bool LEAN>
  __device__ __forceinline__ void tail_loop(const LaneMap<kTailE>& tm, const TileRange& tr, const unsigned char* slot,
                                            std::size_t lg_base) const;
};

}  // namespace owner_detail
}  // namespace echo::cuda
