// Stages reduce + gather of the owner kernel (docs/numerics.md 4): the owner waits for the P - 1
// push flags of its tile, sums the dequantized copies and its own unquantized values in fp32 in
// rank order, quantizes the sum once, writes the codes into every peer's gather slot (NCCL: its
// own) and its own output from the same codes, and posts the tile's gather flag on every peer.
#pragma once

#include <cstddef>

#include "kernels/owner/lanes.cuh"

namespace echo::cuda {
namespace owner_detail {

// Codes and parameter word of peer r's copy of a lane (loaded before they are decoded).
template <class V>
__device__ __forceinline__ void OwnerStages<V>::load_copy(int r, std::size_t lg, Codes& c,
                                                          unsigned& w) const {
  const unsigned char* slot = reinterpret_cast<const unsigned char*>(a.peer_base[a.rank]) +
                              a.layout.recv_offset + static_cast<std::size_t>(r) * a.layout.slot_bytes;
  w = load_param_word(slot + a.codes_bytes, lg, symmetric);
  c.load(slot + lg * group_bytes + lm.lane_in_group * Codes::kBytes);
}

// The owner's fp32 sum of one lane in rank order: the received copies dequantized, its own
// values unquantized. Peers are taken kPeerBatch at a time, the batch's loads issued before any
// arithmetic. -0 + v = v for every v (a NaN comes back quieted, which every later use of the sum
// does anyway), so starting from -0 and adding rank 0 equals starting from rank 0's copy.
template <class V>
__device__ __forceinline__ void OwnerStages<V>::sum_copies(const LaneGroup& g, std::size_t lg, const float (&xs)[E],
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
      // A wide group's copy decodes as any other (params_of_word gives its doubled scale).
      const DecodeParams dp = params_of_word<kOptions>(pw[j], symmetric, BITS);
      if (dp.s != dp.s) {
        const float nan = poisoned_value();  // a poisoned copy
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

// Stages reduce + gather: the own segment's tile.
template <class V>
__device__ bool OwnerStages<V>::reduce(int tile) {
  const TileRange tr = tile_range(a, a.rank, tile);
  if (tr.first == tr.end) return true;
  if constexpr (kLeanVariant) {
    if (lean_tile(tr, true)) {
      if constexpr (V::kDualLocalBf16Copies) {
        if (dual_local_bf16()) return reduce_tile<true, kConfigDualLocalBf16>(tile, tr);
      }
      return reduce_tile<true>(tile, tr);
    }
  }
  return reduce_tile<false>(tile, tr);
}
template <class V>
template <bool LEAN, int CONFIG>
__device__ __forceinline__ bool OwnerStages<V>::reduce_tile(int tile, const TileRange& tr) {
  const CompensatorArgs c = configured<CONFIG>(a.comp);
  char* own = a.peer_base[a.rank];
  const unsigned long long w0 = rec.wait_begin(a);
  for (int r = 0; r < a.ranks && !a.nccl; ++r) {
    if (r == a.rank) continue;
    if (!block_wait_flag(a.wait, flag_at(own, a.layout.push_flags_offset, r, tile), epoch,
                         Stage::kReduce, r, tile)) {
      return false;
    }
  }
  rec.wait_end(a, w0);
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
    if constexpr (kRotationOption) {  // the rotation's instance only (push.cuh says why)
      if (rotated_group<LEAN>(g)) rotate_lanes<E>(group_lanes(lm.lanes_per_group), xs);
    }
    // fp32 sum in rank order; the owner's own copy is never quantized. A NaN sum poisons its
    // group, and reaches memory only through the local residual's state, stored canonical.
    float acc[E];
    sum_copies(g, lg, xs, acc);
    const GroupStats st = group_stats<E>(acc, g.valid, lm.lanes_per_group);
    if (!g.active) continue;
    // Gather: quantize the sum once and send the same codes to every peer. A wide group (its map,
    // encoding and doubled decode scale as in the push) is not poisoned, so it is not counted.
    const GroupMap map = lane_group_map<kOptions>(qp, st.mn, st.mx, st.finite, a.wide_groups);
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
    const DecodeParams dp = decode_params_of<kOptions>(map, symmetric, BITS);
    float y[E];
    if (map.poisoned) {
#pragma unroll
      for (int k = 0; k < E; ++k) y[k] = poisoned_value();
      store_elems<D, E>(a.out, g.e0, g.valid, LEAN || out_aligned, y);
    } else if (rotated_output_of<LEAN>(c, g, codes, dp, y)) {
      // A rotated group's output (the rotation's instance only).
    } else {
      // Finite scale: the values are not NaN (a wide group's may overflow to +-Inf), the hardware
      // conversion rounds them. The code values come from `bits` (one subtraction each) or, with
      // the state in registers, from the packed codes (fewer live registers).
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
      if constexpr (kRotationOption) {
        owner_residual<LEAN>(c, g, acc, y, m1, m2);
      } else {
        float u[E];
#pragma unroll
        for (int k = 0; k < E; ++k) u[k] = numerics::local_residual(!LEAN && a.backward ? __fmul_rn(acc[k], sc.unscale) : acc[k], y[k]);
        update_state<E>(c, u, m1, m2);
        store_state<E>(c, g.e0, g.valid, m1, m2);
      }
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

// The rotation's instance, a rotated group (docs/numerics.md 2.6): the owner's output from the
// gathered codes, decoded (rotated units), de-rotated, back to gradient units, stored; y as the
// local residual uses it. A butterfly may overflow, and Inf - Inf is a NaN: stored canonical (the
// common path's values cannot be NaN). False (and nothing done) for any other group; the other
// instances compile none of it.
template <class V>
template <bool LEAN>
__device__ __forceinline__ bool OwnerStages<V>::rotated_output_of(const CompensatorArgs& c, const LaneGroup& g,
                                                                  const Codes& codes, const DecodeParams& dp,
                                                                  float (&y)[E]) const {
  if constexpr (kRotationOption) {
    if (!rotated_group<LEAN>(g)) return false;
    float q[E], v[E];
    codes.code_values(q);
#pragma unroll
    for (int k = 0; k < E; ++k) v[k] = decode_finite_value(dp.s, dp.z, q[k]);
    unrotate_lanes<E>(group_lanes(lm.lanes_per_group), v);
#pragma unroll
    for (int k = 0; k < E; ++k) {
      const float w = !LEAN && a.backward ? __fmul_rn(v[k], sc.unscale) : v[k];
      y[k] = (COMP && c.residual == ResidualMode::kLocal) ? round_to<D>(w) : w;
    }
    store_elems<D, E>(a.out, g.e0, g.valid, LEAN || out_aligned, y);
    return true;
  } else {
    return false;
  }
}

// Local residual of the owner: its gather error u = acc - y in gradient units, with acc
// de-rotated first in a rotated group (docs/numerics.md 2.6: the state stays unrotated).
template <class V>
template <bool LEAN>
__device__ __forceinline__ void OwnerStages<V>::owner_residual(const CompensatorArgs& c, const LaneGroup& g,
                                                               const float (&acc)[E], const float (&y)[E],
                                                               float (&m1)[E], float (&m2)[E]) const {
  float u[E];
  if (rotated_group<LEAN>(g)) {
    float s[E];
#pragma unroll
    for (int k = 0; k < E; ++k) s[k] = acc[k];
    unrotate_lanes<E>(group_lanes(lm.lanes_per_group), s);
#pragma unroll
    for (int k = 0; k < E; ++k) u[k] = numerics::local_residual(!LEAN && a.backward ? __fmul_rn(s[k], sc.unscale) : s[k], y[k]);
  } else {
#pragma unroll
    for (int k = 0; k < E; ++k) u[k] = numerics::local_residual(!LEAN && a.backward ? __fmul_rn(acc[k], sc.unscale) : acc[k], y[k]);
  }
  update_state<E>(c, u, m1, m2);
  store_state<E>(c, g.e0, g.valid, m1, m2);
}

}  // namespace owner_detail
}  // namespace echo::cuda
