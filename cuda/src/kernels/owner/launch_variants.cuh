// The owner kernel's variants on the host side: the list of (lane elements, compensator) shapes,
// the instance a launch runs (fused, or the split push + reduce and tail kernels), its dynamic
// shared memory, residency and preloading, and owner_unit, the entry points of one instantiation
// unit (owner_allreduce_<dtype>_b<bits>[_wide].cu, which instantiates it for its dtype, bit width
// and instance set).
#pragma once

#include <algorithm>
#include <cstddef>

#include "kernels/owner/kernel.cuh"
#include "kernels/owner/variant.cuh"
#include "launch.h"
#include "device/staged_loads.cuh"

namespace echo::cuda {
namespace owner_detail {

// Dynamic shared memory of a variant: the staging buffers of the staged ones, none otherwise.
template <DType D, int BITS, int E, bool COMP>
constexpr std::size_t staged_bytes() {
  using S = OwnerVariant<D, BITS, E, COMP>;
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
template <DType D, int BITS, int E, bool COMP, int STAGES, int PEER_BATCH = default_peer_batch(E, COMP),
          int OPTIONS = kNoOptions>
cudaError_t launch_instance(const CallArgs& a, bool last_round, int grid, cudaStream_t stream) {
  using S = OwnerVariant<D, BITS, E, COMP, STAGES, PEER_BATCH, OPTIONS>;
  // A launch reserves the staging buffers only when its call stages (the 16-element lanes with fp32
  // state do not, and run faster without the reservation: docs/performance.md, "Staged loads in
  // shared memory"); the tail stages nothing.
  const bool stages = S::kStaged && (S::kStagedStateBytes != 2 || a.comp.bf16_state) && STAGES != kTailStages;
  owner_allreduce_kernel<D, BITS, E, COMP, STAGES, PEER_BATCH, OPTIONS>
      <<<grid, kBlockThreads, stages ? staged_bytes<D, BITS, E, COMP>() : 0, stream>>>(a, last_round);
  return cudaGetLastError();
}

// Peers' copies per batch of the push + reduce kernel of a split variant with more than two ranks.
constexpr int kSplitPeerBatch = 4;

// The instance sets of a translation unit: kNoOptions (the instances without the options' code,
// for calls with overflow-groups poison, and the fused kAllOptions instance for every call with
// the rotation) or kOptionWide (the same instances compiled with the wide groups, for calls with
// wide groups and no rotation, the default spec's: owner_runs_wide_only). A unit refuses a call meant for the other set.
template <DType D, int BITS, int E, bool COMP, int SET>
cudaError_t launch_variant(const CallArgs& a, bool last_round, int grid, cudaStream_t stream) {
  static_assert(SET == kNoOptions || SET == kOptionWide, "an owner unit compiles one of two instance sets");
  if (owner_runs_wide_only(a) != (SET == kOptionWide)) return cudaErrorInvalidValue;
  if constexpr (SET == kNoOptions) {
    // Calls with the rotation: the fused options instance for every launch (it runs the stages a
    // launch names, so also a split call's push + reduce and tail launches).
    if (a.rotation) {
      return launch_instance<D, BITS, E, COMP, kFusedStages, default_peer_batch(E, COMP), kAllOptions>(
          a, last_round, grid, stream);
    }
  }
  constexpr int kBatch = default_peer_batch(E, COMP);
  if constexpr (owner_split_tail(E, COMP)) {
    if (a.stages == kTailStages) {
      return launch_instance<D, BITS, E, COMP, kTailStages, kBatch, SET>(a, last_round, grid, stream);
    }
    if ((a.stages & kStageTail) == 0) {
      if (a.ranks > 2) {
        return launch_instance<D, BITS, E, COMP, kPushReduceStages, kSplitPeerBatch, SET>(a, last_round, grid,
                                                                                          stream);
      }
      return launch_instance<D, BITS, E, COMP, kPushReduceStages, kBatch, SET>(a, last_round, grid, stream);
    }
  }
  return launch_instance<D, BITS, E, COMP, kFusedStages, kBatch, SET>(a, last_round, grid, stream);
}

// The (elements per lane, compensator) shapes of the kernel variants of a bit width;
// lane_elements() picks 8 only with the compensator (local residual), so the 8-element variants
// exist only with COMP.
template <int E, bool COMP>
struct LaneShape {
  static constexpr int kLaneElements = E;
  static constexpr bool kCompensated = COMP;
};
template <class... Shapes>
struct ShapeList {};
using OwnerShapes = ShapeList<LaneShape<32, false>, LaneShape<32, true>, LaneShape<16, false>,
                              LaneShape<16, true>, LaneShape<8, true>>;

// Calls f(shape) for the shape of `e` elements per lane and compensator `comp`; false if none has it.
template <class F, class... Shapes>
bool with_shape(ShapeList<Shapes...>, int e, bool comp, F&& f) {
  return ((e == Shapes::kLaneElements && comp == Shapes::kCompensated ? (f(Shapes{}), true) : false) || ...);
}

// Calls f(shape) for every shape, in the list's order.
template <class F, class... Shapes>
void for_each_shape(ShapeList<Shapes...>, F&& f) {
  (f(Shapes{}), ...);
}

// Launches the variant of a call of this dtype and bit width (a.bits == BITS) from instance set SET.
template <DType D, int BITS, int SET>
cudaError_t launch_dtype_bits(const CallArgs& a, bool last_round, int grid, cudaStream_t stream) {
  const Compensation c = compensation_of(a.comp.mode, a.comp.residual);
  cudaError_t result = cudaErrorInvalidValue;
  with_shape(OwnerShapes{}, lane_elements(BITS, a.group, c), c != Compensation::kOff, [&](auto shape) {
    using S = decltype(shape);
    result = launch_variant<D, BITS, S::kLaneElements, S::kCompensated, SET>(a, last_round, grid, stream);
  });
  return result;
}

// The kernels of a variant in instance set SET: the fused one, for split variants the push + reduce
// ones (both batches) and the tail one, and in the kNoOptions set the kAllOptions one (null where
// the variant or set has none).
template <DType D, int BITS, int E, bool COMP, int SET>
struct Instances {
  static constexpr bool kSplit = owner_split_tail(E, COMP);
  static constexpr int kBatch = default_peer_batch(E, COMP);
  template <int STAGES, int PEER_BATCH = kBatch>
  static const void* split_kernel() {
    if constexpr (kSplit) {
      return reinterpret_cast<const void*>(owner_allreduce_kernel<D, BITS, E, COMP, STAGES, PEER_BATCH, SET>);
    } else {
      return nullptr;
    }
  }
  static const void* fused() {
    return reinterpret_cast<const void*>(owner_allreduce_kernel<D, BITS, E, COMP, kFusedStages, kBatch, SET>);
  }
  static const void* options() {
    if constexpr (SET == kNoOptions) {
      return reinterpret_cast<const void*>(owner_allreduce_kernel<D, BITS, E, COMP, kFusedStages, kBatch, kAllOptions>);
    } else {
      return nullptr;
    }
  }
  static const void* push_reduce() { return split_kernel<kPushReduceStages>(); }
  static const void* batched() { return split_kernel<kPushReduceStages, kSplitPeerBatch>(); }
  static const void* tail() { return split_kernel<kTailStages>(); }
  // The kernels that take the staging buffers (fused, push + reduce, options) and the tail.
  static constexpr int kCount = 5;
  static void list(const void* (&f)[kCount]) {
    f[0] = fused();
    f[1] = push_reduce();
    f[2] = batched();
    f[3] = tail();
    f[4] = options();
  }
};

// Resident blocks per multiprocessor of the variant a call of this dtype, bit width and shape
// launches from instance set SET (the fewest of its kernels: a call launches them on the same grid).
template <DType D, int BITS, int SET>
int blocks_per_sm_dtype_bits(int group, Compensation c) {
  int n = 1;
  with_shape(OwnerShapes{}, lane_elements(BITS, group, c), c != Compensation::kOff, [&](auto shape) {
    using S = decltype(shape);
    using I = Instances<D, BITS, S::kLaneElements, S::kCompensated, SET>;
    const void* f[I::kCount];
    I::list(f);
    n = 1 << 30;
    for (int k = 0; k < I::kCount; ++k) {
      const std::size_t smem = f[k] == I::tail() ? 0 : staged_bytes<D, BITS, S::kLaneElements, S::kCompensated>();
      if (f[k] != nullptr) n = std::min(n, resident_blocks_per_sm(f[k], smem));
    }
  });
  return n;
}

// Loads every kernel of this dtype, bit width and instance set into the current context (see
// preload_kernels) and lets the staged ones use their dynamic shared memory (above the default 48
// KiB for some).
template <DType D, int BITS, int SET>
cudaError_t preload_dtype_bits() {
  cudaError_t e = cudaSuccess;
  auto load = [&](auto shape) {
    using S = decltype(shape);
    using I = Instances<D, BITS, S::kLaneElements, S::kCompensated, SET>;
    constexpr std::size_t kStagedBytes = staged_bytes<D, BITS, S::kLaneElements, S::kCompensated>();
    const void* f[I::kCount];
    I::list(f);
    for (int k = 0; k < I::kCount && e == cudaSuccess; ++k) {
      if (f[k] == nullptr) continue;
      e = load_kernels({f[k]});
      if (e == cudaSuccess && f[k] != I::tail() && kStagedBytes > 0) {
        e = cudaFuncSetAttribute(f[k], cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kStagedBytes));
      }
    }
  };
  for_each_shape(OwnerShapes{}, [&](auto shape) {
    if (e == cudaSuccess) load(shape);
  });
  return e;
}

}  // namespace owner_detail

template <DType D, int BITS, int SET>
OwnerUnit owner_unit() {
  return {&owner_detail::launch_dtype_bits<D, BITS, SET>, &owner_detail::blocks_per_sm_dtype_bits<D, BITS, SET>,
          &owner_detail::preload_dtype_bits<D, BITS, SET>};
}

}  // namespace echo::cuda
