// Host launchers, one per kernel and of the same name (the kernels live in kernels/*.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <initializer_list>

#include "kernel_args.h"

namespace echo::cuda {

// The compensator work of an owner-kernel call: none, or the compensator with the local residual
// (state updated inside push and reduce) or the global one (push and reduce only apply it). The
// two modes favour different lane widths (lane_elements).
enum class Compensation : int { kOff = 0, kLocal = 1, kGlobal = 2 };
inline Compensation compensation_of(CompensatorMode mode, ResidualMode residual) {
  if (mode == CompensatorMode::kOff) return Compensation::kOff;
  return residual == ResidualMode::kLocal ? Compensation::kLocal : Compensation::kGlobal;
}

// Elements per thread of push and reduce for a bit width, group size and compensator work.
int lane_elements(int bits, int group, Compensation comp);
// Whether the owner kernel variant of `e` elements per lane has a split form: push + reduce in one
// kernel and the tail in a second, launched after it on the same grid and stream, each with its own
// register allocation. The compensated 8-element lanes (local residual) have one; with it their
// reduce loads four peers' copies at once when P > 2 (docs/performance.md, "Split tail from 2^27
// elements").
constexpr bool owner_split_tail(int e, bool comp) { return comp && e == 8; }
// Whether a call of `count` elements runs its owner rounds in the split form (two launches per
// round): its variant has one and count >= min_count (CommOptions::split_tail_min_count).
inline bool owner_allreduce_splits_tail(int bits, int group, Compensation comp, std::size_t count,
                                        std::size_t min_count) {
  return count >= min_count && owner_split_tail(lane_elements(bits, group, comp), comp != Compensation::kOff);
}
// Whether a call runs on the owner kernel's wide instances (owner_allreduce_<dtype>_b<bits>_wide.cu):
// overflow-groups wide without the rotation (docs/numerics.md 2.4). Calls with the rotation, wide
// groups or not, run the fused options instance of the default units.
inline bool owner_runs_wide_only(const CallArgs& a) { return a.wide_groups && !a.rotation; }
// One instantiation unit of the owner kernel (kernels/owner_allreduce_<dtype>_b<bits>[_wide].cu):
// its host entry points, rows of the dispatch table (owner_dispatch.cpp). launch refuses a call
// meant for the other instance set; blocks_per_sm is the fewest of the shape's kernels.
struct OwnerUnit {
  cudaError_t (*launch)(const CallArgs& a, bool last_round, int grid, cudaStream_t stream);
  int (*blocks_per_sm)(int group, Compensation comp);
  cudaError_t (*preload)();
};
// The unit of dtype D, bit width BITS and instance set SET (kNoOptions or kOptionWide,
// kernels/instance_options.cuh): defined in kernels/owner/launch_variants.cuh, instantiated by
// that unit's translation unit alone.
template <DType D, int BITS, int SET>
OwnerUnit owner_unit();
// Resident blocks per multiprocessor of the owner kernel variant for this call shape (the fewest
// of its default and wide instances).
int owner_allreduce_blocks_per_sm(DType dtype, int bits, int group, Compensation comp);
int exact_allreduce_max_blocks_per_sm();

// Loads the kernels into the current device's context (cudaFuncGetAttributes forces the load);
// the first error, if any.
inline cudaError_t load_kernels(const void* const* fns, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    cudaFuncAttributes attr;
    if (const cudaError_t e = cudaFuncGetAttributes(&attr, fns[i]); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}
inline cudaError_t load_kernels(std::initializer_list<const void*> fns) {
  return load_kernels(fns.begin(), fns.size());
}

// Resident blocks of kBlockThreads per multiprocessor of a kernel launched with `dynamic_smem`
// bytes of dynamic shared memory, at least 1 (1 when the query fails: the caller then sizes for
// the fewest).
inline int resident_blocks_per_sm(const void* fn, std::size_t dynamic_smem = 0) {
  int n = 0;
  if (fn == nullptr ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, fn, kBlockThreads, dynamic_smem) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  return n < 1 ? 1 : n;
}

// Load every kernel variant into the current device's context. Called when a communicator is
// created: with lazy module loading, a first launch inside a call may synchronize the context
// while a kernel of this rank already spins on a peer's flag, which would deadlock.
cudaError_t owner_allreduce_preload();
cudaError_t exact_allreduce_preload();
cudaError_t backward_max_preload();
cudaError_t compensator_update_preload();

// One launch of the owner all-reduce on `grid` resident blocks: the stages args.stages names of
// one round (push, reduce + gather, tail). A launch of all three runs the fused kernel; a launch of
// some runs, where the call's variant has a split form (owner_split_tail), the split kernel for
// them (the tail's alone, or push + reduce's).
cudaError_t owner_allreduce(const CallArgs& args, bool last_round, int grid, cudaStream_t stream);
// One round of the exact small-message path (one shot: every rank sends x' to every rank).
cudaError_t exact_allreduce(const CallArgs& args, bool last_round, int grid, cudaStream_t stream);
// Backward mode: max |x'| over the whole message, published to every peer's scale word.
cudaError_t backward_max(const CallArgs& args, int grid, cudaStream_t stream);
// Kernels that may have to run while other ranks' owner kernels spin on the same GPU (the backward
// max, whose word those kernels wait for, and the global-mode update, which the rank's next call
// waits for) are declared with at least kAuxBlocksPerSm blocks of kBlockThreads per multiprocessor:
// at most 64 registers per thread, a block smaller than any owner-kernel block. Ranks sharing a GPU
// each size their owner grid to their share of the resident blocks, so a block of these kernels
// always fits where the not yet started ranks' share is free; a larger block could wait behind
// the spinning kernels until they time out.
inline constexpr int kAuxBlocksPerSm = 4;
// Global residual mode: u = x' - y / P and the state update, from the stash and the output.
cudaError_t compensator_update(const CallArgs& args, int grid, cudaStream_t stream);

}  // namespace echo::cuda
