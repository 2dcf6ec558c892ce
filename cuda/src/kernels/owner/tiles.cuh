// Where a lane works in the owner kernel: a tile's groups, the flag of a (source, tile), a lane's
// place in the block's sweep of a tile and its group in one block iteration, and the input words a
// lane loads ahead of their use. Shared by every stage (push.cuh, reduce.cuh, tail.cuh).
#pragma once

#include <cstddef>

#include "kernel_args.h"
#include "device/lane_ops.cuh"

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

}  // namespace owner_detail
}  // namespace echo::cuda
