// Stage push of the owner kernel (docs/numerics.md 4): this rank's x' of segment `dest`, quantized
// per group, written as codes + fp16 parameters into the owner's receive slot (peer-to-peer) or the
// local send slot (NCCL), then the tile's push flag posted on the owner. With the local residual
// the push also updates the compensator state from its own rounding error.
#pragma once

#include <cstddef>

#include "kernels/owner/lanes.cuh"

namespace echo::cuda {
namespace owner_detail {

// Stage push: segment `dest` of x' to its owner.
template <class V>
__device__ void OwnerStages<V>::push(int dest, int tile) {
  const TileRange tr = tile_range(a, dest, tile);
  if (tr.first == tr.end) return;
  if constexpr (kLeanVariant) {
    if (lean_tile(tr, false)) {
      if constexpr (V::kDualLocalBf16Copies) {
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
template <class V>
template <bool LEAN, int CONFIG>
__device__ __forceinline__ void OwnerStages<V>::push_tile(int dest, int tile, const TileRange& tr) {
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
    // The options' code is compiled into the options instance only (if constexpr): even as dead
    // code it changed the default instances' register allocation.
    if constexpr (kOptions) {
      if (rotated_group<LEAN>(g)) rotate_lanes<E>(group_lanes(lm.lanes_per_group), xs);
    }
    const GroupStats st = group_stats<E>(xs, g.valid, lm.lanes_per_group);
    if (!g.active) continue;
    const GroupMap map = make_fp16_group_map(qp, st.mn, st.mx, st.finite);
    if constexpr (kOptions) {
      if (takes_wide_map(map, st, a.wide_groups)) {
        push_wide_lane<LEAN>(c, g, st, g.grp - seg_first - a.round_group_begin, slot, x, xs, m1, m2);
        continue;
      }
    }
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
      bool rotated = false;
      if constexpr (kOptions) {
        rotated = !map.poisoned && rotated_group<LEAN>(g);
        if (rotated) {
          // Rotated: the residual is in the compensator's (unrotated) units (a poisoned group's
          // NaNs stay NaN either way).
          float v[E];
#pragma unroll
          for (int k = 0; k < E; ++k) v[k] = decode_finite_value(dp.s, dp.z, q[k]);
          unrotate_lanes<E>(group_lanes(lm.lanes_per_group), v);
#pragma unroll
          for (int k = 0; k < E; ++k) u[k] = numerics::local_residual(x[k], !LEAN && a.backward ? __fmul_rn(v[k], sc.unscale) : v[k]);
        }
      }
      if (!rotated) {
        // One element at a time: decoding all first would hold E more values in registers.
#pragma unroll
        for (int k = 0; k < E; ++k) {
          float v = map.poisoned ? poisoned_value() : decode_finite_value(dp.s, dp.z, q[k]);
          if (!LEAN && a.backward) v = __fmul_rn(v, sc.unscale);
          u[k] = numerics::local_residual(x[k], v);
        }
      }
      update_state<E>(c, u, m1, m2);
      store_state<E>(c, g.e0, g.valid, m1, m2);
    }
  }
  if (a.nccl) return;  // ordered by the stream and the following ncclSend
  // Publish the tile to its owner (release after the barrier covers every thread's stores).
  block_post_flag(flag_at(a.peer_base[dest], a.layout.push_flags_offset, a.rank, tile), epoch);
}

// Push of a lane whose finite group is past the fp16 scale range under overflow-groups wide
// (docs/numerics.md 2.4): the loop body above with the wide map, its encoding and its decoding, in
// the same order. A function of its own so that the common loop carries none of it.
template <class V>
template <bool LEAN>
__device__ __forceinline__ void OwnerStages<V>::push_wide_lane(const CompensatorArgs& c, const LaneGroup& g,
                                                               const GroupStats& st, std::size_t lg,
                                                               unsigned char* slot, const float (&x)[E],
                                                               const float (&xs)[E], float (&m1)[E],
                                                               float (&m2)[E]) const {
  const GroupMap map = make_wide_group_map(QuantParams{BITS, a.kind}, st.mn, st.mx);
  Codes codes;
  quantize_lane_wide(map, xs, g.valid, codes);
  codes.store(slot + lg * group_bytes + lm.lane_in_group * Codes::kBytes);
  if (lm.lane_in_group == 0) store_params(slot + a.codes_bytes, lg, symmetric, map);
  if (COMP && c.residual == ResidualMode::kLocal) {
    float q[E], v[E];
    codes.code_values(q);
#pragma unroll
    for (int k = 0; k < E; ++k) v[k] = map.poisoned ? poisoned_value() : decode_wide_value(map, q[k]);
    if (!map.poisoned && rotated_group<LEAN>(g)) unrotate_lanes<E>(group_lanes(lm.lanes_per_group), v);
    float u[E];
#pragma unroll
    for (int k = 0; k < E; ++k) {
      const float w = !LEAN && a.backward ? __fmul_rn(v[k], sc.unscale) : v[k];
      u[k] = numerics::local_residual(x[k], w);
    }
    update_state<E>(c, u, m1, m2);
    store_state<E>(c, g.e0, g.valid, m1, m2);
  }
}

}  // namespace owner_detail
}  // namespace echo::cuda
