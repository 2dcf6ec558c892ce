// Stage tail of the owner kernel (docs/numerics.md 4): wait for owner `owner`'s gather flag of a
// tile, dequantize the gathered codes and write the output. It runs on 16-element lanes in every
// variant (32 for 1024-element groups), with its own lean copy of the loop.
#pragma once

#include <cstddef>

#include "kernels/owner/lanes.cuh"

namespace echo::cuda {
namespace owner_detail {

// L2 prefetch of the codes and parameters of groups [it, min(it + one block iteration, end)) in a
// slot whose first group is `lg_base`: the tail issues it two iterations ahead of use, from one
// thread (measured on the stage probe: tail 355 -> 317 us at 1 GiB; the same prefetch of input
// and state in push and reduce made those stages slower, so they do without).
template <class V>
__device__ __forceinline__ void OwnerStages<V>::prefetch_slot(const unsigned char* slot, std::size_t lg_base,
                                                              std::size_t it, std::size_t end,
                                                              int groups_per_block) const {
  if (it >= end) return;
  const std::size_t last = it + groups_per_block < end ? it + groups_per_block : end;
  const std::size_t g0 = it - lg_base, n = last - it;
  prefetch_l2(slot + g0 * group_bytes, n * group_bytes);
  const std::size_t pw = symmetric ? 2 : 4;
  prefetch_l2(slot + a.codes_bytes + g0 * pw, n * pw);
}

// Stage tail: owner's gathered tile into the output, on 16-element lanes whatever the variant's
// push and reduce lanes (measured at 1 GiB, P = 2: 250 us against 316 on 8-element lanes in the
// compensated variants, 220 us against 342 on 32 in the uncompensated ones); only a
// 1024-element group needs 32 to fit in one warp.
template <class V>
__device__ bool OwnerStages<V>::tail(int owner, int tile) {
  if constexpr (E == 32) {
    if (a.group > 16 * 32) return tail_lanes<32>(owner, tile);
  }
  return tail_lanes<16>(owner, tile);
}

// The tail on lanes of kTailE elements. Codes and parameters of the next block iteration are
// loaded before the current one is decoded.
template <class V>
template <int kTailE>
__device__ bool OwnerStages<V>::tail_lanes(int owner, int tile) {
  const LaneMap<kTailE> tm(a.group);
  const TileRange tr = tile_range(a, owner, tile);
  if (tr.first == tr.end) return true;
  char* own = a.peer_base[a.rank];
  const unsigned long long w0 = rec.wait_begin(a);
  if (!a.nccl && !block_wait_flag(a.wait, flag_at(own, a.layout.gather_flags_offset, owner, tile),
                                  epoch - a.gather_launch_back, Stage::kTail, owner, tile)) {
    return false;
  }
  rec.wait_end(a, w0);
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

template <class V>
template <int kTailE, bool LEAN>
__device__ __forceinline__ void OwnerStages<V>::tail_loop(const LaneMap<kTailE>& tm, const TileRange& tr,
                                                          const unsigned char* slot, std::size_t lg_base) const {
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
    // A wide group (docs/numerics.md 2.4) decodes as any other: params_of_word gives its doubled
    // scale.
    const DecodeParams dp = params_of_word<kOptions>(word, symmetric, BITS);
    float y[kTailE];
    if (dp.s != dp.s) {
      // Poisoned group: every element is NaN, stored as the canonical one.
#pragma unroll
      for (int k = 0; k < kTailE; ++k) y[k] = poisoned_value();
      store_elems<D, kTailE>(a.out, g.e0, g.valid, LEAN || out_aligned, y);
    } else if (kRotationOption && rotated_group<LEAN>(g)) {
      if constexpr (kRotationOption) {
        // Rotated group (docs/numerics.md 2.6): decoded, de-rotated, back to gradient units. A
        // butterfly may overflow, and Inf - Inf is a NaN: stored canonical.
        float q[kTailE];
        c.code_values(q);
#pragma unroll
        for (int k = 0; k < kTailE; ++k) y[k] = decode_finite_value(dp.s, dp.z, q[k]);
        unrotate_lanes<kTailE>(group_lanes(tm.lanes_per_group), y);
        if (!LEAN && a.backward) {
#pragma unroll
          for (int k = 0; k < kTailE; ++k) y[k] = __fmul_rn(y[k], sc.unscale);
        }
        store_elems<D, kTailE>(a.out, g.e0, g.valid, LEAN || out_aligned, y);
      }
    } else {
      float q[kTailE];
      c.code_values(q);
#pragma unroll
      for (int k = 0; k < kTailE; ++k) {
        float v = decode_finite_value(dp.s, dp.z, q[k]);  // +-Inf at most (a wide group's), no NaN
        if (!LEAN && a.backward) v = __fmul_rn(v, sc.unscale);  // times a power of two: no NaN
        y[k] = v;
      }
      store_elems<D, kTailE, true>(a.out, g.e0, g.valid, LEAN || out_aligned, y);
    }
  }
}

}  // namespace owner_detail
}  // namespace echo::cuda
