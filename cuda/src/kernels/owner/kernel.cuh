// The owner kernel's iteration skeleton: one persistent kernel per rank and launch takes jobs from
// a per-rank queue, decodes each into its stage, peer and tile, runs it, and records it (job
// trace builds only). The stages live in push.cuh, reduce.cuh and tail.cuh; the round and epoch
// protocol they follow is written down in docs/cuda-api.md, "Rounds and epochs".
#pragma once

#include "kernel_args.h"
#include "kernels/owner/job_trace.cuh"
#include "kernels/owner/lanes.cuh"
#include "kernels/owner/push.cuh"
#include "kernels/owner/reduce.cuh"
#include "kernels/owner/tail.cuh"
#include "kernels/owner/variant.cuh"
#include "device/lane_ops.cuh"

namespace echo::cuda {
namespace owner_detail {

using namespace device;

// The block's next job and whether the call may go on, shared by all its threads.
struct JobSlot {
  long long job;
  int ok;
};

template <DType D, int BITS, int E, bool COMP, int STAGES, int PEER_BATCH, int OPTIONS = kNoOptions>
__global__ void __launch_bounds__(kBlockThreads, owner_min_blocks(E, COMP)) owner_allreduce_kernel(CallArgs a, bool last_round) {
  using V = OwnerVariant<D, BITS, E, COMP, STAGES, PEER_BATCH, OPTIONS>;
  __shared__ JobSlot slot;
  extern __shared__ uint4 staging[];  // staged_bytes<D, BITS, E, COMP>() bytes, or none
  const unsigned long long epoch = a.control->seq + 1;
  Scaling sc = make_scaling(0);
  bool ok = true;
  if (a.backward) ok = block_read_scaling(a, epoch - a.round, &sc);
  OwnerStages<V> st(a, epoch, sc, staging);
  const int P = a.ranks;
  // A step of the fused kernel holds P - 1 pushes (tile s, to ranks rank + 1, rank + 2, ...), one
  // reduce (tile s - lag) and P - 1 tails (tile s - lag - tail_lag, of the same ranks in the same
  // order). The push + reduce kernel of a split variant runs the first two at the same lag; its
  // tail kernel runs the P - 1 tails of tile s at step s (the reduces are done).
  const long long jobs_per_step = V::kFused ? 2LL * P - 1 : V::kTailOnly ? P - 1 : P;
  const long long steps =
      static_cast<long long>(a.num_tiles) + (V::kFused ? a.lag + a.tail_lag : V::kTailOnly ? 0 : a.lag);
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
    const unsigned long long t_start = st.rec.job_begin(a);
    // The job decode (the order above): the job's stage, peer and tile, run at once; stage 0 where
    // the step holds no work for the job (pipeline fill and drain) or the launch does not run its
    // stage (args.stages). The recorder reads the decoded job. Written inline: a decode function
    // (returning the job, or calling the stage back) changed the kernels' register allocation.
    const long long step = job / jobs_per_step;
    const int r = static_cast<int>(job % jobs_per_step);
    JobStage js{0, 0, 0};
    bool job_ok = true;
    if constexpr (V::kTailOnly) {
      if ((a.stages & kStageTail) && step < a.num_tiles) {
        js = {kStageTail, (a.rank + 1 + r) % P, static_cast<int>(step)};
        job_ok = st.tail(js.peer, js.tile);
      }
    } else {
      if (r < P - 1) {
        if ((a.stages & kStagePush) && step < a.num_tiles) {
          js = {kStagePush, (a.rank + 1 + r) % P, static_cast<int>(step)};
          st.push(js.peer, js.tile);
        }
      } else if (r == P - 1) {
        const long long tile = step - a.lag;
        if ((a.stages & kStageReduce) && tile >= 0 && tile < a.num_tiles) {
          js = {kStageReduce, a.rank, static_cast<int>(tile)};
          job_ok = st.reduce(js.tile);
        }
      } else if constexpr (V::kFused) {
        const long long tile = step - a.lag - a.tail_lag;
        if ((a.stages & kStageTail) && tile >= 0 && tile < a.num_tiles) {
          js = {kStageTail, (a.rank + 1 + (r - P)) % P, static_cast<int>(tile)};
          job_ok = st.tail(js.peer, js.tile);
        }
      }
    }
    __syncthreads();  // every thread has read the slot and finished the job
    st.rec.job_end(a, job, js, t_start);
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

}  // namespace owner_detail
}  // namespace echo::cuda
