// The call path: allreduce() validates the call, takes the communicator's plan for its size and
// spec (plan.h), fills the kernels' arguments and enqueues the launches the plan lists.
#include <algorithm>
#include <cstdint>
#include <string>

#include "check.h"
#include "communicator_impl.h"
#include "launch.h"
#include "plan.h"

namespace echo::cuda {

Status nccl_allreduce(Communicator* comm, const CallArgs& base, const Schedule& sched, cudaStream_t stream);
Status nccl_exact_exchange(Communicator* comm, std::size_t exact_count, bool terms_16bit, cudaStream_t stream);

namespace {

Status validate_call(const Communicator* comm, std::size_t count, const AllReduceSpec& spec,
                     const CompensatorBuffers* state) {
  ECHO_TRY(can_implement(spec, comm->ranks));
  if (count == 0) return Status(StatusCode::kInvalidArgument, "element count must be >= 1");
  if (spec.compensator.mode != CompensatorMode::kOff) {
    if (state == nullptr) {
      return Status(StatusCode::kInvalidArgument, "the compensator needs a state");
    }
    if (state->comm != comm) {
      return Status(StatusCode::kInvalidArgument, "compensator state belongs to another communicator");
    }
    if (count > state->capacity) {
      return Status(StatusCode::kInvalidArgument,
                    "message of " + std::to_string(count) + " elements exceeds the state capacity " +
                        std::to_string(state->capacity));
    }
    if (state->count != 0 && state->state_dtype != spec.compensator.state_dtype) {
      return Status(StatusCode::kInvalidArgument,
                    std::string("compensator state of rank ") + std::to_string(comm->rank) + " holds " +
                        dtype_name(state->state_dtype) + " averages but the call asks for " +
                        dtype_name(spec.compensator.state_dtype) + " (reset the state to change its type)");
    }
    if (state->count != 0 && state->count != count) {
      return Status(StatusCode::kInvalidArgument,
                    "compensator state of rank " + std::to_string(comm->rank) + " holds " +
                        std::to_string(state->count) + " elements but the message has " +
                        std::to_string(count) + " (reset the state between passes of different size)");
    }
  }
  return Status::Ok();
}

}  // namespace

CallArgs call_args(const Communicator& comm, const Plan& plan, std::size_t count, const AllReduceSpec& spec,
                   const void* in, void* out, const CompensatorBuffers* state, float* compensated) {
  CallArgs a{};
  a.job_trace = comm.job_trace;
  a.job_trace_records = comm.job_trace_records;
  a.rank = comm.rank;
  a.ranks = comm.ranks;
  a.dtype = spec.dtype;
  a.bits = spec.quant.bits;
  a.group = spec.quant.group;
  a.kind = spec.quant.kind;
  a.wide_groups = spec.quant.overflow == OverflowGroups::kWide;
  a.rotation = spec.quant.rotation == Rotation::kHadamard;
  a.count = count;
  a.in = in;
  a.out = out;
  a.compensated = compensated;
  a.backward = plan.backward;
  a.nccl = plan.nccl;
  a.groups_per_segment = plan.groups_per_segment;
  a.num_groups = plan.num_groups;
  a.layout = comm.layout;
  for (int r = 0; r < comm.ranks; ++r) a.peer_base[r] = comm.peer_base[r];
  a.control = comm.control();
  a.wait.rank = comm.rank;
  a.wait.timeout_ns = static_cast<unsigned long long>(comm.options.timeout_seconds * 1e9);
  a.wait.error = comm.error;
  a.wait.abort = &a.control->abort;
  set_compensator_args(spec.compensator, &a.comp);
  if (spec.compensator.mode != CompensatorMode::kOff) {
    a.comp.m1 = state->m1;
    a.comp.m2 = state->m2;
    a.comp.fresh = state->fresh;
    a.comp.stash = state->stash;
  }
  if (!plan.exact) {
    a.codes_bytes = plan.schedule.codes_bytes;
    a.tile_groups = plan.schedule.tile_groups;
    a.lag = plan.schedule.lag;
    a.tail_lag = plan.schedule.tail_lag;
  }
  return a;
}

Status launch(Communicator* comm, const Plan& plan, CallArgs a, CompensatorBuffers* state, cudaStream_t stream) {
  // The previous call's update (side stream) must finish before this call reads the state.
  if (comm->update_pending) {
    ECHO_CUDA_CHECK(cudaStreamWaitEvent(stream, comm->update_done, 0));
    comm->update_pending = false;
  }
  if (a.nccl && comm->nccl == nullptr) {
    return Status(StatusCode::kUnsupported,
                  "the NCCL transport needs an NCCL communicator (create_from_nccl, or create_group "
                  "with one GPU per rank)");
  }
  if (plan.backward) {
    ECHO_CUDA_CHECK(backward_max(a, plan.backward_grid, stream));
    if (a.nccl) {
      auto* words = reinterpret_cast<unsigned long long*>(comm->workspace + comm->layout.scale_words_offset);
      ECHO_NCCL_CHECK(ncclAllGather(words + comm->rank, words, 1, ncclUint64, comm->nccl, stream));
    }
  }
  if (plan.exact) {
    const std::size_t cap = plan.exact_capacity;
    const int rounds = plan.exact_rounds;
    const bool compensate = a.comp.mode != CompensatorMode::kOff;
    for (int r = 0; r < rounds; ++r) {
      a.exact_begin = static_cast<std::size_t>(r) * cap;
      a.exact_count = std::min(cap, a.count - a.exact_begin);
      const int chunks = static_cast<int>((a.exact_count + kExactChunk - 1) / kExactChunk);
      const int grid = std::min(chunks, plan.exact_resident);
      if (!a.nccl) {
        a.round = r;
        a.stages = kStagePush | kStageReduce;
        ECHO_CUDA_CHECK(exact_allreduce(a, r + 1 == rounds, grid, stream));
        continue;
      }
      // NCCL: send launch into the own slot, the slot to every peer, reduce launch.
      a.round = 2 * r;
      a.stages = kStagePush;
      ECHO_CUDA_CHECK(exact_allreduce(a, false, grid, stream));
      ECHO_TRY(
          nccl_exact_exchange(comm, a.exact_count, exact_terms_16bit(a.dtype, a.backward, compensate), stream));
      a.round = 2 * r + 1;
      a.stages = kStageReduce;
      ECHO_CUDA_CHECK(exact_allreduce(a, r + 1 == rounds, grid, stream));
    }
    return Status::Ok();
  }
  const Schedule& sched = plan.schedule;
  if (a.nccl) {
    ECHO_TRY(nccl_allreduce(comm, a, sched, stream));
  } else {
    // One launch per round, or two where the call shape runs its tail in a kernel of its own
    // (push + reduce, then the tail, which waits for the gather flags of the launch before).
    const bool split = plan.split;
    const int launches = split ? 2 : 1;
    for (int r = 0; r < sched.rounds; ++r) {
      a.round_group_begin = static_cast<std::size_t>(r) * sched.round_groups;
      a.round_groups = sched.round_groups;
      a.num_tiles = sched.num_tiles;
      const bool last = r + 1 == sched.rounds;
      a.round = launches * r;
      a.stages = split ? kStagePush | kStageReduce : kStagePush | kStageReduce | kStageTail;
      a.gather_launch_back = 0;
      ECHO_CUDA_CHECK(owner_allreduce(a, last && !split, sched.grid, stream));
      if (split) {
        a.round += 1;
        a.stages = kStageTail;
        a.gather_launch_back = 1;
        ECHO_CUDA_CHECK(owner_allreduce(a, last, sched.grid, stream));
      }
    }
  }
  if (plan.side_update) {
    // Update beside the caller's next kernel: fork to the side stream, join at the next call.
    ECHO_CUDA_CHECK(cudaEventRecord(comm->entry_done, stream));
    ECHO_CUDA_CHECK(cudaStreamWaitEvent(comm->side, comm->entry_done, 0));
    ECHO_CUDA_CHECK(compensator_update(a, plan.update_grid, comm->side));
    ECHO_CUDA_CHECK(cudaMemsetAsync(state->fresh, 0, sizeof(int), comm->side));
    ECHO_CUDA_CHECK(cudaEventRecord(comm->update_done, comm->side));
    comm->update_pending = true;
  }
  return Status::Ok();
}

Status allreduce(Communicator* comm, const void* in, void* out, std::size_t count,
                 const AllReduceSpec& spec, CompensatorBuffers* state, cudaStream_t stream,
                 float* compensated) {
  if (comm == nullptr || in == nullptr || out == nullptr) {
    return Status(StatusCode::kInvalidArgument, "allreduce needs a communicator, input and output");
  }
  ECHO_TRY(validate_call(comm, count, spec, state));
  if (compensated != nullptr && (reinterpret_cast<std::uintptr_t>(compensated) & 15u) != 0) {
    // x' is stored in 16-byte words; a misaligned store would fault the context.
    return Status(StatusCode::kInvalidArgument, "the compensated output must be 16-byte aligned");
  }
  // A timed-out peer wait leaves the flags of the group inconsistent: refuse further calls.
  ECHO_TRY(check_error_record(comm));
  ECHO_CUDA_CHECK(cudaSetDevice(comm->device));
  const Plan& plan = plan_for(comm, count, spec);
  ECHO_TRY(launch(comm, plan, call_args(*comm, plan, count, spec, in, out, state, compensated), state, stream));
  if (spec.compensator.mode != CompensatorMode::kOff) {
    state->count = count;
    state->state_dtype = spec.compensator.state_dtype;
  }
  return Status::Ok();
}

Status join(Communicator* comm, cudaStream_t stream) {
  if (comm == nullptr) return Status(StatusCode::kInvalidArgument, "null communicator");
  ECHO_CUDA_CHECK(cudaSetDevice(comm->device));
  if (comm->update_pending) {
    ECHO_CUDA_CHECK(cudaStreamWaitEvent(stream, comm->update_done, 0));
    comm->update_pending = false;
  }
  return Status::Ok();
}

Status synchronize(Communicator* comm, AllReduceReport* report) {
  if (comm == nullptr) return Status(StatusCode::kInvalidArgument, "null communicator");
  ECHO_CUDA_CHECK(cudaSetDevice(comm->device));
  ECHO_CUDA_CHECK(cudaDeviceSynchronize());
  comm->update_pending = false;
  ECHO_TRY(check_error_record(comm));
  if (report != nullptr) {
    Control c{};
    ECHO_CUDA_CHECK(cudaMemcpy(&c, comm->control(), sizeof(Control), cudaMemcpyDeviceToHost));
    report->poisoned_groups = c.report_poisoned;
    report->scale_exponent = c.scale_exponent;
    report->exact_path = c.exact_path != 0;
  }
  return Status::Ok();
}

}  // namespace echo::cuda
