// Internal state of a communicator: the rank's workspace, the peer address table, the side stream
// for the compensator update and the schedule cache.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <map>
#include <tuple>

#include "echo/cuda/communicator.h"
#include "echo/numerics/compensator_step.h"
#include "kernel_args.h"

namespace echo::cuda {

// Tiling of one call shape, computed once per (dtype, bits, quantizer, group, segment size).
struct Schedule {
  int grid;
  int rounds;
  std::size_t round_groups;  // groups per round of a full segment
  int tile_groups;
  int num_tiles;             // tiles per round
  int lag;       // steps between the push of a tile and its reduce
  int tail_lag;  // steps between the reduce of a tile and its tail
  std::size_t codes_bytes;
};

// What the tiling of a call shape depends on; schedule_for fills it from the communicator (the
// stage probe from its own one-GPU setup), so both cut the same tiles.
struct ScheduleInputs {
  std::size_t slot_bytes;          // receive slot of one source: one round of its codes and parameters
  std::size_t groups_per_segment;  // groups of a full segment
  std::size_t group_bytes;         // packed codes of one group
  std::size_t param_bytes;         // wire parameters of one group
  int group;                       // elements per group
  int bits;                        // bits per code
  int lane_elements;               // elements per thread of push and reduce
  int blocks_per_sm;               // resident blocks of the owner kernel variant
  int sm_count;
  int ranks;
  int ranks_on_device;             // ranks on this rank's GPU: the grid
  int max_ranks_on_device;         // ranks on the group's most shared GPU: the tiles
  double tiles_per_sqrt_iteration; // the square-root rule's factor; 0: default_tiles_per_sqrt_iteration
  int tiles_per_wave;              // tiles per wave of resident jobs instead; 0: the square-root rule
  int reduce_lag_waves;            // push -> reduce distance in waves; 0 picks kDefaultLagWaves
  int tail_lag_waves;              // reduce -> tail distance in waves; 0 picks kDefaultLagWaves
};
// The default tiling: about 16 sqrt(n) tiles for a round of n block iterations per segment (each
// tile a whole number of iterations), the best fit to the tiles-per-wave sweeps at 4 MiB - 1 GiB on
// 2 x H200 (docs/performance.md, "Tiles by the square-root rule"): few tiles stretch the pipeline's
// fill and drain, many small ones pay the per-job overhead (queue atomic, flag post and wait, block
// barrier). 8-bit jobs move twice the bytes per element and do better with more tiles: 24 sqrt(n).
inline constexpr double kTilesPerSqrtIteration = 16.0;
inline constexpr double kTilesPerSqrtIteration8Bit = 24.0;
inline constexpr double default_tiles_per_sqrt_iteration(int bits) {
  return bits == 8 ? kTilesPerSqrtIteration8Bit : kTilesPerSqrtIteration;
}
// Measured at 16 MiB - 1 GiB on 2 x H200 (docs/performance.md, "Lags of three waves"): lags of 1
// and 2 waves leave blocks waiting on peer flags; 3 and beyond are on a plateau.
inline constexpr int kDefaultLagWaves = 3;

// Rounds, tiles, lag and grid of a call shape: rounds split the segment evenly in whole block
// iterations that fit the slot; tiles by the kTilesPerSqrtIteration rule (or, when given,
// about tiles_per_wave tiles per wave of resident jobs), at most kMaxTilesPerRound; tiles and lag
// depend only on values every rank shares.
Schedule plan_schedule(const ScheduleInputs& in);

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

// (dtype, bits, quantizer, group, segment groups, compensator work): the variant decides residency.
using ScheduleKey = std::tuple<int, int, int, int, std::size_t, int>;  // last: Compensation

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
  std::map<ScheduleKey, Schedule> schedules;
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
// Allocates and zeroes the rank's workspace, streams, events and error record.
Status init_local(Communicator* comm);

}  // namespace echo::cuda
