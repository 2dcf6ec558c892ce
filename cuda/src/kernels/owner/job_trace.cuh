// The owner kernel's job trace as a recorder policy: JobTraceRecorder writes one record per job
// (kernel_args.h, kJobTraceWords; read by bench/tools/job_trace.cpp) when the library is built with
// ECHO_CUDA_JOB_TRACE; otherwise the kernel holds a NoJobRecorder, whose calls compile to nothing
// (tracing costs the kernels registers and spills).
#pragma once

#include <cstddef>
#include <type_traits>

#include "device/flags.cuh"
#include "kernel_args.h"

namespace echo::cuda {
namespace owner_detail {

// The stage a job runs (kStagePush, kStageReduce, kStageTail; 0: none at its step), the peer it
// pushes to or takes the tail of (the own rank for the reduce) and its tile.
struct JobStage {
  int stage;
  int peer;
  int tile;
};

struct NoJobRecorder {
  __device__ __forceinline__ unsigned long long job_begin(const CallArgs&) { return 0; }
  __device__ __forceinline__ unsigned long long wait_begin(const CallArgs&) const { return 0; }
  __device__ __forceinline__ void wait_end(const CallArgs&, unsigned long long) {}
  __device__ __forceinline__ void job_end(const CallArgs&, long long, const JobStage&, unsigned long long) const {}
};

struct JobTraceRecorder {
  unsigned long long waited_ns = 0;  // thread 0's time on peer flags in the current job

  // The job's start time (0 when the call records nothing).
  __device__ __forceinline__ unsigned long long job_begin(const CallArgs& a) {
    const unsigned long long t_start = a.job_trace != nullptr ? device::globaltimer_ns() : 0;
    waited_ns = 0;
    return t_start;
  }
  __device__ __forceinline__ unsigned long long wait_begin(const CallArgs& a) const {
    return a.job_trace != nullptr ? device::globaltimer_ns() : 0;
  }
  __device__ __forceinline__ void wait_end(const CallArgs& a, unsigned long long w0) {
    if (a.job_trace != nullptr) waited_ns += device::globaltimer_ns() - w0;
  }
  // Thread 0, after the block's barrier at the end of job `job`: its record.
  __device__ __forceinline__ void job_end(const CallArgs& a, long long job, const JobStage& js,
                                          unsigned long long t_start) const {
    if (a.job_trace == nullptr || threadIdx.x != 0) return;
    // Records of launch `round` start at round times the job count of a fused launch (the most of
    // any kernel).
    const long long fused_jobs = (static_cast<long long>(a.num_tiles) + a.lag + a.tail_lag) * (2LL * a.ranks - 1);
    const std::size_t rec = static_cast<std::size_t>(a.round) * static_cast<std::size_t>(fused_jobs) +
                            static_cast<std::size_t>(job);
    if (rec >= a.job_trace_records) return;
    unsigned long long* w = a.job_trace + rec * kJobTraceWords;
    // The job's stage as the record names it: 1 push, 2 reduce, 3 tail, 0 none.
    const int kind = js.stage == kStageTail ? 3 : js.stage;
    w[0] = (static_cast<unsigned long long>(kind) << 56) | (static_cast<unsigned long long>(blockIdx.x) << 32) |
           static_cast<unsigned long long>(job & 0xFFFFFFFFll);
    w[1] = (static_cast<unsigned long long>(device::sm_id()) << 32) | (waited_ns & 0xFFFFFFFFull);
    w[2] = t_start;
    w[3] = device::globaltimer_ns();
  }
};

using JobRecorder = std::conditional_t<kJobTrace, JobTraceRecorder, NoJobRecorder>;

}  // namespace owner_detail
}  // namespace echo::cuda
