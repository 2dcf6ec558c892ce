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
    // The options' code is compiled into the instances of its option only (if constexpr): even as
    // dead code the rotation's changed the register allocation of instances without it.
    if constexpr (kRotationOption) {
      if (rotated_group<LEAN>(g)) rotate_lanes<E>(group_lanes(lm.lanes_per_group), xs);
    }
    const GroupStats st = group_stats<E>(xs, g.valid, lm.lanes_per_group);
    if (!g.active) continue;
    // A wide group (docs/numerics.md 2.4) takes the loop below with its own map: its encoding in
    // quantize_lane, its values through decode_params_of's doubled scale.
    const GroupMap map = lane_group_map<kOptions>(qp, st.mn, st.mx, st.finite, a.wide_groups);
    unsigned bits[E];
    Codes codes;
    quantize_lane(map, xs, g.valid, bits, codes);
    const std::size_t lg = g.grp - seg_first - a.round_group_begin;  // group index in the slot
    codes.store(slot + lg * group_bytes + lm.lane_in_group * Codes::kBytes);
    if (lm.lane_in_group == 0) store_params(params, lg, symmetric, map);
    if (COMP && c.residual == ResidualMode::kLocal) {
      // Local residual: the rounding error this rank injected, u = x' - v (gradient units).
      const DecodeParams dp = decode_params_of<kOptions>(map, symmetric, BITS);
      float q[E];
      codes.code_values(q);  // from the packed codes: fewer live registers than `bits`
      float u[E];
      bool rotated = false;
      if constexpr (kRotationOption) {
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

}  // namespace owner_detail
}  // namespace echo::cuda
