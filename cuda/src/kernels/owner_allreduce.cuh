// The owner all-reduce kernel (included once per dtype by owner_allreduce_<dtype>.cu). The
// owner all-reduce over peer-to-peer writes (paper Sec. 4.2 and Appendix C; numerics in
// docs/numerics.md 4). One persistent kernel per rank and round runs the four stages as jobs on
// tiles of whole groups (or, in the split form of some variants, two kernels one after the other:
// push + reduce + gather, then the tail; owner_split_tail in launch.h):
//   push   quantize segment j != rank of x' = x + c, write codes + fp16 parameters into owner j,
//          publish push flag [rank][tile] on j
//   reduce wait for the P-1 push flags of a tile, dequantize the copies, fp32 sum in rank order
//          with the own full-precision values, requantize once
//   gather write the reduced codes into every peer, publish gather flag [rank][tile] there; the
//          owner dequantizes its own output from the same codes
//   tail   wait for owner j's gather flag of a tile, dequantize, write the output
// Jobs are ordered in steps (push of tile s, reduce of tile s - lag, tail of s - lag - tail_lag), the
// same order on every rank, and blocks take them from a per-rank queue in that order (one atomic
// per job). A job waits only for jobs of earlier steps on other ranks, which some resident block
// there has already taken, so the kernel cannot deadlock whatever the residency, and tiles of
// different stages overlap (quantization hides behind transfers). Each stage's loop exists twice:
// for lean tiles (whole block iterations of whole groups, aligned buffers, forward; lean_tile())
// with every per-lane condition known at compile time, and for the rest; both compute the same bits.
#pragma once

#include <algorithm>

#include "kernel_args.h"
#include "lane_ops.cuh"
#include "launch.h"
#include "staged_loads.cuh"

namespace echo::cuda {
namespace owner_detail {

using namespace device;

struct TileRange {
  std::size_t first;  // first group (message index)
  std::size_t end;    // one past the last group
};

// Groups of tile t of segment s in this round; empty when the segment is short.
__device__ __forceinline__ TileRange tile_range(const CallArgs& a, int s, int t) {
  const std::size_t seg_first = static_cast<std::size_t>(s) * a.groups_per_segment;
  std::size_t seg_groups = 0;
  if (seg_first < a.num_groups) {
    seg_groups = a.num_groups - seg_first < a.groups_per_segment ? a.num_groups - seg_first
                                                                 : a.groups_per_segment;
  }
  const std::size_t round_end = a.round_group_begin + a.round_groups;
  std::size_t lo = a.round_group_begin + static_cast<std::size_t>(t) * a.tile_groups;
  std::size_t hi = lo + a.tile_groups;
  if (hi > round_end) hi = round_end;
  if (hi > seg_groups) hi = seg_groups;
  if (lo > hi) lo = hi;
  return {seg_first + lo, seg_first + hi};
}

__device__ __forceinline__ unsigned long long* flag_at(char* base, std::size_t offset, int src, int tile) {
  return reinterpret_cast<unsigned long long*>(base + offset) +
         static_cast<std::size_t>(src) * kMaxTilesPerRound + tile;
}

// Position of a lane inside the block's sweep of a tile.
template <int E>
struct LaneMap {
  int lanes_per_group;
  int groups_per_block;
  int group_slot;     // group index within one block iteration
  int lane_in_group;
  __device__ LaneMap(int group) {
    lanes_per_group = group / E;
    const int groups_per_warp = 32 / lanes_per_group;
    groups_per_block = groups_per_warp * kWarpsPerBlock;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    group_slot = warp * groups_per_warp + lane / lanes_per_group;
    lane_in_group = lane % lanes_per_group;
  }
};

// A lane's group in one block iteration of a tile.
struct LaneGroup {
  std::size_t grp;  // message group index
  bool active;      // the group lies in the tile
  std::size_t e0;   // first element of the lane
  int valid;        // elements of the lane inside the message
};

// A lane's input words, loaded one block iteration ahead of their use so that the loads of the
// next iteration are in flight while the current one computes. Runs that are partial or not
// 16-byte aligned are read element by element when used.
template <DType D, int E>
struct InputWords {
  using T = typename Elem<D>::T;
  static constexpr int kWords = E * static_cast<int>(sizeof(T)) / 16;
  uint4 w[kWords];
  bool fast;
  __device__ __forceinline__ void load(const void* base, const LaneGroup& g, bool aligned) {
    fast = g.active && g.valid == E && aligned;
    if (fast) {
      const uint4* q = reinterpret_cast<const uint4*>(static_cast<const T*>(base) + g.e0);
#pragma unroll
      for (int i = 0; i < kWords; ++i) w[i] = q[i];
    }
  }
  __device__ __forceinline__ void to_float(const void* base, const LaneGroup& g, float (&v)[E]) const {
    if (fast) {
      constexpr int kPer = 16 / static_cast<int>(sizeof(T));
#pragma unroll
      for (int i = 0; i < kWords; ++i) {
        const T* t = reinterpret_cast<const T*>(&w[i]);
#pragma unroll
        for (int k = 0; k < kPer; ++k) v[i * kPer + k] = Elem<D>::load(t[k]);
      }
    } else {
      load_elems<D, E>(base, g.e0, g.valid, false, v);
    }
  }
};

// Stages a kernel instance runs. Most variants run all of them in one kernel (kFusedStages); the
// split ones (owner_split_tail) run push and reduce in one kernel and the tail in a second, launched
// after it on the same stream, so that each gets its own register allocation (docs/performance.md,
// "Split tail from 2^27 elements").
constexpr int kFusedStages = kStagePush | kStageReduce | kStageTail;
constexpr int kPushReduceStages = kStagePush | kStageReduce;
constexpr int kTailStages = kStageTail;

// Peers' copies the reduce loads at once (sum_copies): four in the uncompensated 16-element
// variants, one in the rest; a split variant's push + reduce kernel has an instance with four for
// P > 2 (owner_split_tail).
constexpr int default_peer_batch(int e, bool comp) { return !comp && e == 16 ? 4 : 1; }

// COMP: the compensator is on (its state lives in registers through a tile; off, those
// registers are free). STAGES: the stages of the kernel instance the code is compiled into;
// PEER_BATCH: the reduce's batch of peers' copies.
template <DType D, int BITS, int E, bool COMP, int STAGES = kFusedStages, int PEER_BATCH = default_peer_batch(E, COMP)>
struct OwnerStages {
  using Codes = PackedCodes<BITS, E>;
  using Input = InputWords<D, E>;
  // Register budget: the uncompensated 16-element variants load the next iteration's input ahead
  // in registers and four peers' codes at once; the others (state registers or 32 elements per
  // lane) would spill. The compensated variants on 8- and 16-element lanes copy the next
  // iteration's input and state into shared memory instead (staged_loads.cuh): 8-element lanes
  // either state type, 16-element ones bf16 state only (32 would need too much of it); so do the
  // uncompensated 4-bit 32-element lanes with their input (the 8-bit ones ran slower with it:
  // docs/performance.md, "Staged loads in shared memory"). The rest load where they use.
  static constexpr bool kPrefetch = !COMP && E == 16;
  static constexpr int kPeerBatch = PEER_BATCH;
  static constexpr bool kStaged = (COMP && E <= 16) || (!COMP && E == 32 && BITS == 4);
  static constexpr int kStagedStateBytes = COMP ? (E == 8 ? 4 : 2) : 0;
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
  // instructions than the general loop (docs/performance.md, "Lean tiles"). The compensated
  // variants that do not stage (32-element lanes, groups above 512) keep the general loop only.
  static constexpr bool kLeanVariant = kStaged || !COMP;
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

  // L2 prefetch of the codes and parameters of groups [it, min(it + one block iteration, end)) in a
  // slot whose first group is `lg_base`: the tail issues it two iterations ahead of use, from one
  // thread (measured on the stage probe: tail 355 -> 317 us at 1 GiB; the same prefetch of input
  // and state in push and reduce made those stages slower, so they do without).
  __device__ __forceinline__ void prefetch_slot(const unsigned char* slot, std::size_t lg_base, std::size_t it,
                                                std::size_t end, int groups_per_block) const {
    if (it >= end) return;
    const std::size_t last = it + groups_per_block < end ? it + groups_per_block : end;
    const std::size_t g0 = it - lg_base, n = last - it;
    prefetch_l2(slot + g0 * group_bytes, n * group_bytes);
    const std::size_t pw = symmetric ? 2 : 4;
    prefetch_l2(slot + a.codes_bytes + g0 * pw, n * pw);
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

  // Codes of a lane's values under a group map: encode, zero codes past the message end and in
  // poisoned groups (the reference writes 0 there), pack. `bits` keeps each code's fp32(t + magic).
  __device__ __forceinline__ void quantize_lane(const GroupMap& map, const float (&v)[E], int valid,
                                                unsigned (&bits)[E], Codes& codes) const {
    const float magic = encode_magic(map);
#pragma unroll
    for (int k = 0; k < E; ++k) bits[k] = encode_bits(map, magic, v[k]);
    if (!map.poisoned && valid == E) {
      codes.pack(bits);
      return;
    }
    unsigned b[E];
#pragma unroll
    for (int k = 0; k < E; ++k) b[k] = (map.poisoned || k >= valid) ? 0u : bits[k];
    codes.pack(b);
  }

  // Stage push: segment `dest` of x' to its owner.
  __device__ void push(int dest, int tile) {
    const TileRange tr = tile_range(a, dest, tile);
    if (tr.first == tr.end) return;
    if constexpr (kLeanVariant) {
      if (lean_tile(tr, false)) {
        if constexpr (COMP && E == 8) {
          if (dual_local_bf16()) {
            push_tile<true, kConfigDualLocalBf16>(dest, tile, tr);
            return;
          }
        }
        push_tile<true>(dest, tile, tr);
        return;
      }
    }
    push_tile<false>(dest, tile, tr);
  }
  template <bool LEAN, int CONFIG = kConfigAny>
  __device__ __forceinline__ void push_tile(int dest, int tile, const TileRange& tr) {
    const CompensatorArgs c = configured<CONFIG>(a.comp);
    const std::size_t seg_first = static_cast<std::size_t>(dest) * a.groups_per_segment;
    // P2P: straight into the owner's receive slot of this rank. NCCL: into the local send slot of
    // the owner (the gather region is idle until the reduce launch).
    unsigned char* slot =
        a.nccl ? reinterpret_cast<unsigned char*>(a.peer_base[a.rank]) + a.layout.gather_offset +
                     static_cast<std::size_t>(dest) * a.layout.slot_bytes
               : reinterpret_cast<unsigned char*>(a.peer_base[dest]) + a.layout.recv_offset +
                     static_cast<std::size_t>(a.rank) * a.layout.slot_bytes;
    unsigned char* params = slot + a.codes_bytes;
    const QuantParams qp{BITS, a.kind};
    Input next = first_input<LEAN>(tr);
    int buf = 0;
    stage<LEAN, CONFIG>(tr.first, tr.end, buf);
    for (std::size_t base = tr.first; base < tr.end; base += lm.groups_per_block, buf ^= 1) {
      const LaneGroup g = lane_group<LEAN>(base, tr.end);
      stage_next<LEAN, CONFIG>(base, tr.end, buf);
      const Input cur = take_input<LEAN>(base, tr.end, g, next);
      float x[E], m1[E], m2[E];
      entry<LEAN>(c, g, cur, buf, x, m1, m2);
      float xs[E];
      scaled<LEAN>(x, xs);
      const GroupStats st = group_stats<E>(xs, g.valid, lm.lanes_per_group);
      if (!g.active) continue;
      const GroupMap map = make_fp16_group_map(qp, st.mn, st.mx, st.finite);
      unsigned bits[E];
      Codes codes;
      quantize_lane(map, xs, g.valid, bits, codes);
      const std::size_t lg = g.grp - seg_first - a.round_group_begin;  // group index in the slot
      codes.store(slot + lg * group_bytes + lm.lane_in_group * Codes::kBytes);
      if (lm.lane_in_group == 0) store_params(params, lg, symmetric, map);
      if (COMP && c.residual == ResidualMode::kLocal) {
        // Local residual: the rounding error this rank injected, u = x' - v (gradient units).
        const DecodeParams dp = decode_params_of(map, symmetric, BITS);
        float q[E];
        codes.code_values(q);  // from the packed codes: fewer live registers than `bits`
        float u[E];
#pragma unroll
        for (int k = 0; k < E; ++k) {
          float v = map.poisoned ? poisoned_value() : decode_finite_value(dp.s, dp.z, q[k]);
          if (!LEAN && a.backward) v = __fmul_rn(v, sc.unscale);
          u[k] = numerics::local_residual(x[k], v);
        }
        update_state<E>(c, u, m1, m2);
        store_state<E>(c, g.e0, g.valid, m1, m2);
      }
    }
    if (a.nccl) return;  // ordered by the stream and the following ncclSend
    // Publish the tile to its owner (release after the barrier covers every thread's stores).
    block_post_flag(flag_at(a.peer_base[dest], a.layout.push_flags_offset, a.rank, tile), epoch);
  }

  // Codes and parameter word of peer r's copy of a lane (loaded before they are decoded).
  __device__ __forceinline__ void load_copy(int r, std::size_t lg, Codes& c, unsigned& w) const {
    const unsigned char* slot = reinterpret_cast<const unsigned char*>(a.peer_base[a.rank]) +
                                a.layout.recv_offset + static_cast<std::size_t>(r) * a.layout.slot_bytes;
    w = load_param_word(slot + a.codes_bytes, lg, symmetric);
    c.load(slot + lg * group_bytes + lm.lane_in_group * Codes::kBytes);
  }

  // The owner's fp32 sum of one lane in rank order: the received copies dequantized, its own
  // values unquantized. Peers are taken kPeerBatch at a time, the batch's loads issued before any
  // arithmetic. -0 + v = v for every v (a NaN comes back quieted, which every later use of the sum
  // does anyway), so starting from -0 and adding rank 0 equals starting from rank 0's copy.
  __device__ __forceinline__ void sum_copies(const LaneGroup& g, std::size_t lg, const float (&xs)[E],
                                             float (&acc)[E]) const {
#pragma unroll
    for (int k = 0; k < E; ++k) acc[k] = -0.0f;
    for (int r0 = 0; r0 < a.ranks; r0 += kPeerBatch) {
      Codes cw[kPeerBatch];
      unsigned pw[kPeerBatch];
#pragma unroll
      for (int j = 0; j < kPeerBatch; ++j) {
        const int r = r0 + j;
        if (g.active && r < a.ranks && r != a.rank) load_copy(r, lg, cw[j], pw[j]);
      }
#pragma unroll
      for (int j = 0; j < kPeerBatch; ++j) {
        const int r = r0 + j;
        if (r >= a.ranks) break;
        if (r == a.rank) {
#pragma unroll
          for (int k = 0; k < E; ++k) acc[k] = __fadd_rn(acc[k], xs[k]);
          continue;
        }
        if (!g.active) continue;
        const DecodeParams dp = params_of_word(pw[j], symmetric, BITS);
        if (dp.s != dp.s) {
          const float nan = poisoned_value();
#pragma unroll
          for (int k = 0; k < E; ++k) acc[k] = __fadd_rn(acc[k], nan);
        } else {
          float q[E];
          cw[j].code_values(q);
#pragma unroll
          for (int k = 0; k < E; ++k) {
            const float v = decode_finite_value(dp.s, dp.z, q[k]);
            acc[k] = __fadd_rn(acc[k], v);
          }
        }
      }
    }
  }

  // Job trace: nanoseconds thread 0 spent waiting on peer flags in the current job.
  unsigned long long waited_ns = 0;

  // Stages reduce + gather: the own segment's tile.
  __device__ bool reduce(int tile) {
    const TileRange tr = tile_range(a, a.rank, tile);
    if (tr.first == tr.end) return true;
    if constexpr (kLeanVariant) {
      if (lean_tile(tr, true)) {
        if constexpr (COMP && E == 8) {
          if (dual_local_bf16()) return reduce_tile<true, kConfigDualLocalBf16>(tile, tr);
        }
        return reduce_tile<true>(tile, tr);
      }
    }
    return reduce_tile<false>(tile, tr);
  }
  template <bool LEAN, int CONFIG = kConfigAny>
  __device__ __forceinline__ bool reduce_tile(int tile, const TileRange& tr) {
    const CompensatorArgs c = configured<CONFIG>(a.comp);
    char* own = a.peer_base[a.rank];
    const unsigned long long w0 = kJobTrace && a.job_trace != nullptr ? globaltimer_ns() : 0;
    for (int r = 0; r < a.ranks && !a.nccl; ++r) {
      if (r == a.rank) continue;
      if (!block_wait_flag(a.wait, flag_at(own, a.layout.push_flags_offset, r, tile), epoch,
                           Stage::kReduce, r, tile)) {
        return false;
      }
    }
    if (kJobTrace && a.job_trace != nullptr) waited_ns += globaltimer_ns() - w0;
    const std::size_t seg_first = static_cast<std::size_t>(a.rank) * a.groups_per_segment;
    const QuantParams qp{BITS, a.kind};
    unsigned long long poisoned = 0;
    Input next = first_input<LEAN>(tr);
    int buf = 0;
    stage<LEAN, CONFIG>(tr.first, tr.end, buf);
    for (std::size_t base = tr.first; base < tr.end; base += lm.groups_per_block, buf ^= 1) {
      const LaneGroup g = lane_group<LEAN>(base, tr.end);
      stage_next<LEAN, CONFIG>(base, tr.end, buf);
      const Input cur = take_input<LEAN>(base, tr.end, g, next);
      const std::size_t lg = g.grp - seg_first - a.round_group_begin;
      float x[E], m1[E], m2[E];
      entry<LEAN>(c, g, cur, buf, x, m1, m2);
      float xs[E];
      scaled<LEAN>(x, xs);
      // fp32 sum in rank order; the owner's own copy is never quantized. A NaN sum poisons its
      // group, and reaches memory only through the local residual's state, stored canonical.
      float acc[E];
      sum_copies(g, lg, xs, acc);
      const GroupStats st = group_stats<E>(acc, g.valid, lm.lanes_per_group);
      if (!g.active) continue;
      // Gather: quantize the sum once and send the same codes to every peer.
      const GroupMap map = make_fp16_group_map(qp, st.mn, st.mx, st.finite);
      if (map.poisoned && lm.lane_in_group == 0) ++poisoned;
      unsigned bits[E];
      Codes codes;
      quantize_lane(map, acc, g.valid, bits, codes);
      // NCCL: only the own slot; ncclAllGather delivers it to the peers.
      for (int r = a.nccl ? 0 : 1; r < (a.nccl ? 1 : a.ranks); ++r) {
        const int peer = a.rank + r < a.ranks ? a.rank + r : a.rank + r - a.ranks;
        unsigned char* slot = reinterpret_cast<unsigned char*>(a.peer_base[peer]) + a.layout.gather_offset +
                              static_cast<std::size_t>(a.rank) * a.layout.slot_bytes;
        codes.store(slot + lg * group_bytes + lm.lane_in_group * Codes::kBytes);
        if (lm.lane_in_group == 0) store_params(slot + a.codes_bytes, lg, symmetric, map);
      }
      // The owner's output comes from the very codes it sent.
      const DecodeParams dp = decode_params_of(map, symmetric, BITS);
      float y[E];
      if (map.poisoned) {
#pragma unroll
        for (int k = 0; k < E; ++k) y[k] = poisoned_value();
        store_elems<D, E>(a.out, g.e0, g.valid, LEAN || out_aligned, y);
      } else {
        // Finite scale: the values are finite, the hardware conversion rounds them. The code values
        // come from `bits` (one subtraction each) or, with the state in registers, from the packed
        // codes (fewer live registers).
        float q[E];
        if constexpr (COMP) {
          codes.code_values(q);
        } else {
#pragma unroll
          for (int k = 0; k < E; ++k) q[k] = code_value_of_bits(bits[k]);
        }
#pragma unroll
        for (int k = 0; k < E; ++k) {
          float v = decode_finite_value(dp.s, dp.z, q[k]);
          if (!LEAN && a.backward) v = __fmul_rn(v, sc.unscale);
          y[k] = (COMP && c.residual == ResidualMode::kLocal) ? Elem<D>::load(Elem<D>::store_not_nan(v)) : v;
        }
        store_elems<D, E, true>(a.out, g.e0, g.valid, LEAN || out_aligned, y);
      }
      if (COMP && c.residual == ResidualMode::kLocal) {
        // Local residual of the owner: its gather error, u = acc - y (gradient units).
        float u[E];
#pragma unroll
        for (int k = 0; k < E; ++k) u[k] = numerics::local_residual(!LEAN && a.backward ? __fmul_rn(acc[k], sc.unscale) : acc[k], y[k]);
        update_state<E>(c, u, m1, m2);
        store_state<E>(c, g.e0, g.valid, m1, m2);
      }
    }
    if (poisoned != 0) atomicAdd(&a.control->poisoned[(epoch - a.round) & 1], poisoned);
    // Publish the gathered tile to every peer: one thread per peer after the barrier.
    __syncthreads();
    if (!a.nccl && threadIdx.x > 0 && threadIdx.x < a.ranks) {
      const int peer = (a.rank + threadIdx.x) % a.ranks;
      store_release_sys(flag_at(a.peer_base[peer], a.layout.gather_flags_offset, a.rank, tile), epoch);
    }
    return true;
  }

  // Stage tail: owner's gathered tile into the output, on 16-element lanes whatever the variant's
  // push and reduce lanes (measured at 1 GiB, P = 2: 250 us against 316 on 8-element lanes in the
  // compensated variants, 220 us against 342 on 32 in the uncompensated ones); only a
  // 1024-element group needs 32 to fit in one warp.
  __device__ bool tail(int owner, int tile) {
    if constexpr (E == 32) {
      if (a.group > 16 * 32) return tail_lanes<32>(owner, tile);
    }
    return tail_lanes<16>(owner, tile);
  }

  // The tail on lanes of kTailE elements. Codes and parameters of the next block iteration are
  // loaded before the current one is decoded.
  template <int kTailE>
  __device__ bool tail_lanes(int owner, int tile) {
    const LaneMap<kTailE> tm(a.group);
    const TileRange tr = tile_range(a, owner, tile);
    if (tr.first == tr.end) return true;
    char* own = a.peer_base[a.rank];
    const unsigned long long w0 = kJobTrace && a.job_trace != nullptr ? globaltimer_ns() : 0;
    if (!a.nccl && !block_wait_flag(a.wait, flag_at(own, a.layout.gather_flags_offset, owner, tile),
                                    epoch - a.gather_launch_back, Stage::kTail, owner, tile)) {
      return false;
    }
    if (kJobTrace && a.job_trace != nullptr) waited_ns += globaltimer_ns() - w0;
    const std::size_t seg_first = static_cast<std::size_t>(owner) * a.groups_per_segment;
    const unsigned char* slot = reinterpret_cast<const unsigned char*>(own) + a.layout.gather_offset +
                                static_cast<std::size_t>(owner) * a.layout.slot_bytes;
    const std::size_t lg_base = seg_first + a.round_group_begin;
    if (threadIdx.x == 0) {
      prefetch_slot(slot, lg_base, tr.first, tr.end, tm.groups_per_block);
      prefetch_slot(slot, lg_base, tr.first + tm.groups_per_block, tr.end, tm.groups_per_block);
    }
    // Lean tiles (whole block iterations of whole groups, aligned output, forward) run the loop
    // with those conditions known, as push and reduce do.
    if (out_aligned && !a.backward && (tr.end - tr.first) % tm.groups_per_block == 0 &&
        tr.end * a.group <= a.count) {
      tail_loop<kTailE, true>(tm, tr, slot, lg_base);
    } else {
      tail_loop<kTailE, false>(tm, tr, slot, lg_base);
    }
    __syncthreads();  // the next job's wait reuses shared state
    return true;
  }

  template <int kTailE, bool LEAN>
  __device__ __forceinline__ void tail_loop(const LaneMap<kTailE>& tm, const TileRange& tr, const unsigned char* slot,
                                            std::size_t lg_base) const {
    using TCodes = PackedCodes<BITS, kTailE>;
    TCodes next_codes;
    unsigned next_word = 0u;
    // The lane's codes and parameter word of the block iteration at `it`, into next_*.
    auto load_iteration = [&](std::size_t it) {
      const LaneGroup n = lane_group_of<kTailE, LEAN>(tm, it, tr.end);
      if (n.active) {
        next_word = load_param_word(slot + a.codes_bytes, n.grp - lg_base, symmetric);
        next_codes.load(slot + (n.grp - lg_base) * group_bytes + tm.lane_in_group * TCodes::kBytes);
      }
    };
    load_iteration(tr.first);
    for (std::size_t base = tr.first; base < tr.end; base += tm.groups_per_block) {
      if (threadIdx.x == 0) prefetch_slot(slot, lg_base, base + 2 * tm.groups_per_block, tr.end, tm.groups_per_block);
      const LaneGroup g = lane_group_of<kTailE, LEAN>(tm, base, tr.end);
      const TCodes c = next_codes;
      const unsigned word = next_word;
      if (base + tm.groups_per_block < tr.end) load_iteration(base + tm.groups_per_block);
      if (!g.active) continue;
      const DecodeParams dp = params_of_word(word, symmetric, BITS);
      float y[kTailE];
      if (dp.s != dp.s) {
        // Poisoned group: every element is NaN, stored as the canonical one.
#pragma unroll
        for (int k = 0; k < kTailE; ++k) y[k] = poisoned_value();
        store_elems<D, kTailE>(a.out, g.e0, g.valid, LEAN || out_aligned, y);
      } else {
        float q[kTailE];
        c.code_values(q);
#pragma unroll
        for (int k = 0; k < kTailE; ++k) {
          float v = decode_finite_value(dp.s, dp.z, q[k]);
          if (!LEAN && a.backward) v = __fmul_rn(v, sc.unscale);  // finite times a power of two: no NaN
          y[k] = v;
        }
        store_elems<D, kTailE, true>(a.out, g.e0, g.valid, LEAN || out_aligned, y);
      }
    }
  }
};

// The block's next job and whether the call may go on, shared by all its threads.
struct JobSlot {
  long long job;
  int ok;
};

// Resident blocks per multiprocessor a variant is compiled for (its register budget).
constexpr int owner_min_blocks(int e, bool comp) { return (e == 32 && comp) ? 1 : (e == 8 ? 3 : 2); }

template <DType D, int BITS, int E, bool COMP, int STAGES, int PEER_BATCH>
__global__ void __launch_bounds__(kBlockThreads, owner_min_blocks(E, COMP)) owner_allreduce_kernel(CallArgs a, bool last_round) {
  __shared__ JobSlot slot;
  extern __shared__ uint4 staging[];  // staged_bytes<D, BITS, E, COMP>() bytes, or none
  const unsigned long long epoch = a.control->seq + 1;
  Scaling sc = make_scaling(0);
  bool ok = true;
  if (a.backward) ok = block_read_scaling(a, epoch - a.round, &sc);
  OwnerStages<D, BITS, E, COMP, STAGES, PEER_BATCH> st(a, epoch, sc, staging);
  const int P = a.ranks;
  // A step of the fused kernel holds P - 1 pushes (tile s), one reduce (tile s - lag) and P - 1
  // tails (tile s - lag - tail_lag). The push + reduce kernel of a split variant runs the first
  // two at the same lag; its tail kernel runs the P - 1 tails of tile s at step s (the reduces
  // are done).
  constexpr bool kFused = STAGES == kFusedStages;
  constexpr bool kTailOnly = STAGES == kTailStages;
  const long long jobs_per_step = kFused ? 2LL * P - 1 : kTailOnly ? P - 1 : P;
  const long long steps = static_cast<long long>(a.num_tiles) + (kFused ? a.lag + a.tail_lag : kTailOnly ? 0 : a.lag);
  const long long jobs = steps * jobs_per_step;
  // Jobs are taken from a queue in order (push of tile s, reduce of s - lag, tail of s - lag -
  // tail_lag), so a job only ever waits for jobs that some resident block on the peer already
  // took: blocks that finish early take more work, and the kernel cannot deadlock whatever the
  // residency. Thread 0 fetches the next index while the block runs the current job.
  if (threadIdx.x == 0) {
    slot.job = static_cast<long long>(atomicAdd(&a.control->next_job, 1ull));
    slot.ok = ok ? 1 : 0;
  }
  __syncthreads();
  long long job = slot.job;
  ok = slot.ok != 0;
  while (ok && job < jobs) {
    unsigned long long next = 0;
    if (threadIdx.x == 0) next = atomicAdd(&a.control->next_job, 1ull);
    const unsigned long long t_start = kJobTrace && a.job_trace != nullptr ? globaltimer_ns() : 0;
    if constexpr (kJobTrace) st.waited_ns = 0;
    const long long step = job / jobs_per_step;
    const int r = static_cast<int>(job % jobs_per_step);
    bool job_ok = true;
    if constexpr (kTailOnly) {
      if ((a.stages & kStageTail) && step < a.num_tiles) job_ok = st.tail((a.rank + 1 + r) % P, static_cast<int>(step));
    } else {
      if (r < P - 1) {
        if ((a.stages & kStagePush) && step < a.num_tiles) st.push((a.rank + 1 + r) % P, static_cast<int>(step));
      } else if (r == P - 1) {
        const long long tile = step - a.lag;
        if ((a.stages & kStageReduce) && tile >= 0 && tile < a.num_tiles) job_ok = st.reduce(static_cast<int>(tile));
      } else if constexpr (kFused) {
        const long long tile = step - a.lag - a.tail_lag;
        if ((a.stages & kStageTail) && tile >= 0 && tile < a.num_tiles) job_ok = st.tail((a.rank + 1 + (r - P)) % P, static_cast<int>(tile));
      }
    }
    __syncthreads();  // every thread has read the slot and finished the job
    if (kJobTrace && a.job_trace != nullptr && threadIdx.x == 0) {
      // Records of launch `round` start at round times the job count of a fused launch (the most
      // of any kernel).
      const long long fused_jobs = (static_cast<long long>(a.num_tiles) + a.lag + a.tail_lag) * (2LL * P - 1);
      const std::size_t rec = static_cast<std::size_t>(a.round) * static_cast<std::size_t>(fused_jobs) +
                              static_cast<std::size_t>(job);
      if (rec < a.job_trace_records) {
        unsigned long long* w = a.job_trace + rec * kJobTraceWords;
        // The job's stage (1 push, 2 reduce, 3 tail; 0: none at this step), as dispatched above.
        const bool is_tail = kTailOnly || r > P - 1;
        const long long tile = kTailOnly ? step : r < P - 1 ? step : r == P - 1 ? step - a.lag : step - a.lag - a.tail_lag;
        const int stage_bit = is_tail ? kStageTail : r < P - 1 ? kStagePush : kStageReduce;
        const int kind = (a.stages & stage_bit) && tile >= 0 && tile < a.num_tiles ? (is_tail ? 3 : r < P - 1 ? 1 : 2) : 0;
        w[0] = (static_cast<unsigned long long>(kind) << 56) | (static_cast<unsigned long long>(blockIdx.x) << 32) |
               static_cast<unsigned long long>(job & 0xFFFFFFFFll);
        w[1] = (static_cast<unsigned long long>(sm_id()) << 32) | (st.waited_ns & 0xFFFFFFFFull);
        w[2] = t_start;
        w[3] = globaltimer_ns();
      }
    }
    if (threadIdx.x == 0) {
      slot.job = static_cast<long long>(next);
      slot.ok = job_ok && !load_volatile(&a.control->abort) ? 1 : 0;
    }
    __syncthreads();
    job = slot.job;
    ok = slot.ok != 0;
  }
  // In the local residual mode the state was updated inside this call: it is no longer fresh.
  finish_launch(a, epoch, sc.k, last_round, 0,
                a.comp.mode != CompensatorMode::kOff && a.comp.residual == ResidualMode::kLocal);
}

// Dynamic shared memory of a variant: the staging buffers of the staged ones, none otherwise.
template <DType D, int BITS, int E, bool COMP>
constexpr std::size_t staged_bytes() {
  using S = OwnerStages<D, BITS, E, COMP>;
  constexpr std::size_t bytes = S::kStaged ? StagedLayout<D, E, S::kStagedStateBytes>::kBytes : 0;
  // The staging buffers of the resident blocks fit a Hopper multiprocessor's 227 KiB of shared
  // memory per block set (with 1 KiB per block reserved and the kernel's static words to spare).
  static_assert(bytes == 0 || (bytes + 2048) * owner_min_blocks(E, COMP) <= 227u * 1024u,
                "staging buffers exceed the shared memory of the variant's resident blocks");
  return bytes;
}

// The instance of a variant that runs a launch's stages: the fused kernel for a launch of every
// stage; for split variants (owner_split_tail) the tail kernel for a tail-only launch and the push
// + reduce kernel for any other (with four peers' copies loaded at once when there are more than
// two ranks, one otherwise: the batch's registers slow the push by 1-3%, which only P > 2 wins
// back). The caller picks fused or split per call (owner_allreduce_splits_tail).
template <DType D, int BITS, int E, bool COMP, int STAGES, int PEER_BATCH = default_peer_batch(E, COMP)>
cudaError_t launch_instance(const CallArgs& a, bool last_round, int grid, cudaStream_t stream) {
  using S = OwnerStages<D, BITS, E, COMP, STAGES, PEER_BATCH>;
  // A launch reserves the staging buffers only when its call stages (the 16-element lanes with fp32
  // state do not, and run faster without the reservation: docs/performance.md, "Staged loads in
  // shared memory"); the tail stages nothing.
  const bool stages = S::kStaged && (S::kStagedStateBytes != 2 || a.comp.bf16_state) && STAGES != kTailStages;
  owner_allreduce_kernel<D, BITS, E, COMP, STAGES, PEER_BATCH>
      <<<grid, kBlockThreads, stages ? staged_bytes<D, BITS, E, COMP>() : 0, stream>>>(a, last_round);
  return cudaGetLastError();
}

// Peers' copies per batch of the push + reduce kernel of a split variant with more than two ranks.
constexpr int kSplitPeerBatch = 4;

template <DType D, int BITS, int E, bool COMP>
cudaError_t launch_variant(const CallArgs& a, bool last_round, int grid, cudaStream_t stream) {
  if constexpr (owner_split_tail(E, COMP)) {
    if (a.stages == kTailStages) return launch_instance<D, BITS, E, COMP, kTailStages>(a, last_round, grid, stream);
    if ((a.stages & kStageTail) == 0) {
      if (a.ranks > 2) {
        return launch_instance<D, BITS, E, COMP, kPushReduceStages, kSplitPeerBatch>(a, last_round, grid, stream);
      }
      return launch_instance<D, BITS, E, COMP, kPushReduceStages>(a, last_round, grid, stream);
    }
  }
  return launch_instance<D, BITS, E, COMP, kFusedStages>(a, last_round, grid, stream);
}

// The kernel variant of a call shape: (bits, elements per lane, compensator); lane_elements()
// picks 8 only with the compensator (local residual), so the 8-element variants exist only with
// COMP.
#define ECHO_OWNER_VARIANTS(X, D)                                                              \
  X(D, 4, 32, false) X(D, 4, 32, true) X(D, 4, 16, false) X(D, 4, 16, true) X(D, 4, 8, true)   \
  X(D, 8, 32, false) X(D, 8, 32, true) X(D, 8, 16, false) X(D, 8, 16, true) X(D, 8, 8, true)

template <DType D>
cudaError_t launch_dtype(const CallArgs& a, bool last_round, int grid, cudaStream_t stream) {
  const Compensation c = compensation_of(a.comp.mode, a.comp.residual);
  const bool comp = c != Compensation::kOff;
  const int e = lane_elements(a.bits, a.group, c);
#define ECHO_LAUNCH(DD, B, EE, C) \
  if (a.bits == B && e == EE && comp == C) return launch_variant<DD, B, EE, C>(a, last_round, grid, stream);
  ECHO_OWNER_VARIANTS(ECHO_LAUNCH, D)
#undef ECHO_LAUNCH
  return cudaErrorInvalidValue;
}

// The kernels of a variant: the fused one, and for split variants the push + reduce ones (both
// batches) and the tail one (null where the variant has none).
template <DType D, int BITS, int E, bool COMP>
struct Instances {
  static constexpr bool kSplit = owner_split_tail(E, COMP);
  static constexpr int kBatch = default_peer_batch(E, COMP);
  template <int STAGES, int PEER_BATCH = kBatch>
  static const void* split_kernel() {
    if constexpr (kSplit) {
      return reinterpret_cast<const void*>(owner_allreduce_kernel<D, BITS, E, COMP, STAGES, PEER_BATCH>);
    } else {
      return nullptr;
    }
  }
  static const void* fused() {
    return reinterpret_cast<const void*>(owner_allreduce_kernel<D, BITS, E, COMP, kFusedStages, kBatch>);
  }
  static const void* push_reduce() { return split_kernel<kPushReduceStages>(); }
  static const void* batched() { return split_kernel<kPushReduceStages, kSplitPeerBatch>(); }
  static const void* tail() { return split_kernel<kTailStages>(); }
  // The kernels that take the staging buffers (fused, push + reduce) and the tail.
  static constexpr int kCount = 4;
  static void list(const void* (&f)[kCount]) {
    f[0] = fused();
    f[1] = push_reduce();
    f[2] = batched();
    f[3] = tail();
  }
};

// Resident blocks per multiprocessor of the variant a call of this shape launches (the fewest of
// its kernels: a call launches them on the same grid).
template <DType D>
int blocks_per_sm_dtype(int bits, int group, Compensation c) {
  int n = 1;
  const bool comp = c != Compensation::kOff;
  const int e = lane_elements(bits, group, c);
#define ECHO_PICK(DD, B, EE, C)                                                                    \
  if (bits == B && e == EE && comp == C) {                                                         \
    using I = Instances<DD, B, EE, C>;                                                             \
    const void* f[I::kCount];                                                                      \
    I::list(f);                                                                                    \
    n = 1 << 30;                                                                                   \
    for (int k = 0; k < I::kCount; ++k) {                                                          \
      const std::size_t smem = f[k] == I::tail() ? 0 : staged_bytes<DD, B, EE, C>();              \
      if (f[k] != nullptr) n = std::min(n, resident_blocks_per_sm(f[k], smem));                    \
    }                                                                                              \
  }
  ECHO_OWNER_VARIANTS(ECHO_PICK, D)
#undef ECHO_PICK
  return n;
}

// Loads every kernel of this dtype into the current context (see preload_kernels) and lets the
// staged ones use their dynamic shared memory (above the default 48 KiB for some).
template <DType D>
cudaError_t preload_dtype() {
  cudaError_t e = cudaSuccess;
#define ECHO_LOAD(DD, B, EE, C)                                                                     \
  if (e == cudaSuccess) {                                                                           \
    using I = Instances<DD, B, EE, C>;                                                              \
    const void* f[I::kCount];                                                                       \
    I::list(f);                                                                                     \
    for (int k = 0; k < I::kCount && e == cudaSuccess; ++k) {                                      \
      if (f[k] == nullptr) continue;                                                                \
      e = load_kernels({f[k]});                                                                     \
      if (e == cudaSuccess && f[k] != I::tail() && staged_bytes<DD, B, EE, C>() > 0) {              \
        e = cudaFuncSetAttribute(f[k], cudaFuncAttributeMaxDynamicSharedMemorySize,                 \
                                 static_cast<int>(staged_bytes<DD, B, EE, C>()));                   \
      }                                                                                             \
    }                                                                                               \
  }
  ECHO_OWNER_VARIANTS(ECHO_LOAD, D)
#undef ECHO_LOAD
  return e;
}

#undef ECHO_OWNER_VARIANTS

}  // namespace owner_detail
}  // namespace echo::cuda
