// Peer-visible readiness flags. A flag only grows: a producer publishes the epoch of the current
// call (one higher for each kernel launch of the group, counted on the device so that captured
// graphs replay correctly), and a consumer waits until the flag reaches that epoch. A flag left
// from an earlier call is below every epoch of later calls, so no flag is ever cleared.
#pragma once

#include <cstdint>
#include <cstdio>

#include "flag_types.h"

namespace echo::cuda::device {

// Stages named in timeout reports.
enum class Stage : int { kPush = 0, kReduce = 1, kGather = 2, kTail = 3, kExact = 4, kScale = 5 };

__device__ __forceinline__ const char* stage_name(Stage s) {
  switch (s) {
    case Stage::kPush: return "push";
    case Stage::kReduce: return "reduce";
    case Stage::kGather: return "gather";
    case Stage::kTail: return "tail";
    case Stage::kExact: return "exact";
    case Stage::kScale: return "scale";
  }
  return "?";
}

__device__ __forceinline__ unsigned long long globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// The multiprocessor this thread runs on (job trace).
__device__ __forceinline__ unsigned sm_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

// Acquire at system scope: data a peer wrote before its release of this flag is visible to this
// thread afterwards (and to the block after the barrier that follows the wait).
__device__ __forceinline__ unsigned long long load_acquire_sys(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// Release at system scope: every write of the block that precedes the barrier before this store
// (codes, parameters, outputs) is visible to a peer that acquires the flag.
__device__ __forceinline__ void store_release_sys(unsigned long long* p, unsigned long long v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// Volatile read of the abort word: another block of this rank may set it at any time.
__device__ __forceinline__ int load_volatile(const int* p) {
  return *reinterpret_cast<const volatile int*>(p);
}


// Records a failed wait: raises the abort word so the rest of the call drains quickly, and, for
// the first failure of the rank only, stores rank, stage, peer and tile where the host reads them
// (mapped memory) and prints them.
__device__ inline void report_timeout(const WaitContext& ctx, Stage stage, int peer, long long tile,
                                      unsigned long long epoch, unsigned long long seen) {
  atomicExch(ctx.abort, 1);
  if (atomicCAS(&ctx.error->code, 0, 1) == 0) {
    ctx.error->rank = ctx.rank;
    ctx.error->stage = static_cast<int>(stage);
    ctx.error->peer = peer;
    ctx.error->tile = tile;
    ctx.error->epoch = epoch;
    ctx.error->seen = seen;
    __threadfence_system();  // make the record visible to the host before the kernel ends
    printf("echo: rank %d timed out in stage %s waiting for peer %d, tile %lld (flag %llu < %llu)\n",
           ctx.rank, stage_name(stage), peer, tile, seen, epoch);
  }
}

// Spins until ready() holds. Every 256 spins it reads the abort word (another wait of this rank
// failed) and the clock. Returns false, after report_timeout, when ctx.timeout_ns passes; `seen()`
// gives the value reported.
template <typename Ready, typename Seen>
__device__ inline bool spin_until(const WaitContext& ctx, Ready ready, Seen seen, Stage stage, int peer,
                                  long long tile, unsigned long long epoch) {
  if (ready()) return true;
  const unsigned long long start = globaltimer_ns();
  for (unsigned spins = 1;; ++spins) {
    if (ready()) return true;
    if ((spins & 255u) == 0) {
      if (load_volatile(ctx.abort)) return false;
      if (globaltimer_ns() - start > ctx.timeout_ns) break;
    }
  }
  report_timeout(ctx, stage, peer, tile, epoch, seen());
  return false;
}

// Thread-level wait: spins until *flag >= epoch. On timeout records rank, tile and stage and
// returns false (the call fails; it never hangs).
__device__ inline bool wait_flag(const WaitContext& ctx, const unsigned long long* flag,
                                 unsigned long long epoch, Stage stage, int peer, long long tile) {
  unsigned long long seen = 0;
  return spin_until(
      ctx, [&] { return (seen = load_acquire_sys(flag)) >= epoch; }, [&] { return seen; }, stage, peer, tile,
      epoch);
}

// Block-level wait: thread 0 spins, the barrier hands the acquired view to the whole block.
// Returns false in every thread when the wait failed.
__device__ inline bool block_wait_flag(const WaitContext& ctx, const unsigned long long* flag,
                                       unsigned long long epoch, Stage stage, int peer,
                                       long long tile) {
  __shared__ int ok;
  if (threadIdx.x == 0) ok = wait_flag(ctx, flag, epoch, stage, peer, tile) ? 1 : 0;
  __syncthreads();
  const bool result = ok != 0;
  __syncthreads();  // ok is reused by the next wait
  return result;
}

// Block-level post: the barrier orders every thread's data writes before thread 0's release.
__device__ inline void block_post_flag(unsigned long long* flag, unsigned long long epoch) {
  __syncthreads();
  if (threadIdx.x == 0) store_release_sys(flag, epoch);
}

}  // namespace echo::cuda::device
