// Internal state of a communicator: the rank's workspace, the peer address table, the side stream
// for the compensator update and the plan cache.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <map>

#include "echo/cuda/communicator.h"
#include "echo/numerics/compensator_step.h"
#include "kernel_args.h"
#include "plan.h"

namespace echo::cuda {

// The kernels' view of a compensator spec: mode, residual, state type (when on) and the constants
// as the reference forms them, fp32 values and fp32(1 - x). The state pointers are left as they are.
inline void set_compensator_args(const CompensatorSpec& cs, CompensatorArgs* c) {
  c->mode = cs.mode;
  c->residual = cs.residual;
  c->eta = cs.eta;
  c->a = cs.a;
  c->oa = numerics::one_minus(cs.a);
  c->beta1 = cs.beta1;
  c->ob1 = numerics::one_minus(cs.beta1);
  c->beta2 = cs.beta2;
  c->ob2 = numerics::one_minus(cs.beta2);
  c->beta = cs.beta;
  c->ob = numerics::one_minus(cs.beta);
  if (cs.mode != CompensatorMode::kOff) c->bf16_state = cs.state_dtype == DType::kBFloat16;
}

class Communicator {
 public:
  int rank = 0;
  int ranks = 1;
  int device = 0;
  int ranks_on_device = 1;      // ranks sharing this rank's GPU (grid sizing)
  int max_ranks_on_device = 1;  // the most ranks on any GPU of the group: the tiling uses it, so
                                // every rank cuts the same tiles whatever GPU it runs on
  int sm_count = 0;
  int exact_blocks_per_sm = 1;
  CommOptions options;
  WorkspaceLayout layout{};
  char* workspace = nullptr;          // own allocation
  char* peer_base[kMaxRanks] = {};    // every rank's workspace in this process's address space
  bool peer_ipc[kMaxRanks] = {};      // opened through cudaIpcOpenMemHandle
  device::ErrorRecord* error = nullptr;  // host-mapped
  cudaStream_t side = nullptr;        // compensator update (global residual mode)
  cudaEvent_t entry_done = nullptr;   // main work of the last call finished (side stream waits)
  cudaEvent_t update_done = nullptr;  // last side-stream update finished (next call waits)
  bool update_pending = false;
  ncclComm_t nccl = nullptr;          // NCCL transport / bootstrap communicator
  bool owns_nccl = false;             // created by create_group (destroyed with the communicator)
  std::map<PlanKey, Plan> plans;       // plan_for's cache
  unsigned long long* job_trace = nullptr;  // diagnostics: per-job timeline of the next calls
  std::size_t job_trace_records = 0;

  Control* control() const { return reinterpret_cast<Control*>(workspace + layout.control_offset); }
};

struct CompensatorBuffers {
  Communicator* comm = nullptr;  // the calls and reset_compensator need it alive
  int device = 0;                // the buffers' device (destroy_compensator needs no communicator)
  std::size_t capacity = 0;
  std::size_t count = 0;  // size of the averages since the last reset (0: reset)
  DType state_dtype = DType::kFloat32;  // type of the averages since the last reset
  float* m1 = nullptr;  // capacity * 4 bytes: fp32 averages, or bf16 ones in the first half
  float* m2 = nullptr;
  void* stash = nullptr;  // capacity * 4 bytes: copy of the input for the global-mode update
  int* fresh = nullptr;
};

WorkspaceLayout make_layout(const CommOptions& options, int ranks);
// Diagnostics: the owner kernels of this rank's next calls record every job into `records` device
// records of kJobTraceWords words (null: stop); later rounds and calls overwrite earlier ones.
inline void set_job_trace(Communicator* comm, unsigned long long* records, std::size_t count) {
  comm->job_trace = records;
  comm->job_trace_records = records == nullptr ? 0 : count;
}
// CommOptions within their documented ranges (slot size, timeout, tiling, lags).
Status validate_options(const CommOptions& options);
// The first failed peer wait recorded on the device (kTimeout naming it), or Ok.
Status check_error_record(const Communicator* comm);
// Allocates and zeroes the rank's workspace, streams, events and error record.
Status init_local(Communicator* comm);

}  // namespace echo::cuda
