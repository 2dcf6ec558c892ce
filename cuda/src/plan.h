// The plan of a call (segments, path, rounds, tiles, launches and grids), made once per message
// size and spec and cached in the communicator; launch() enqueues a call from it. The round and
// epoch protocol the launches follow is docs/cuda-api.md, "Rounds and epochs": every main-kernel
// launch advances the rank's epoch (Control::seq, in device memory) by one, so a call of
// Plan::launches launches moves it from e to e + launches, and the flags its launches post carry
// epochs e + 1 .. e + launches.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <tuple>

#include "echo/allreduce.h"
#include "echo/status.h"
#include "kernel_args.h"

namespace echo::cuda {

class Communicator;
struct CompensatorBuffers;

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

// What the tiling of a call shape depends on; make_plan fills it from the communicator (the stage
// probe from its own one-GPU setup), so both cut the same tiles.
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

// Everything a call of `count` elements under one spec enqueues, derived once.
struct Plan {
  // P segments of whole groups (echo::Segmentation).
  std::size_t groups_per_segment = 0;
  std::size_t num_groups = 0;
  bool nccl = false;          // the NCCL transport: stages apart, NCCL collectives between them
  bool backward = false;      // the max |x'| pre-pass runs first (backward_grid blocks)
  int backward_grid = 0;
  bool exact = false;         // the exact small-message path (count <= spec.exact_max_count)
  // Exact path: rounds of exact_capacity elements, each on at most exact_resident blocks.
  int exact_rounds = 0;
  std::size_t exact_capacity = 0;
  int exact_resident = 0;
  // Owner path: rounds, tiles, lags and grid; split: two launches per round (push + reduce, then
  // the tail in a kernel of its own, owner_allreduce_splits_tail).
  Schedule schedule{};
  bool split = false;
  // Global residual mode: the compensator update on the side stream after the call.
  bool side_update = false;
  int update_grid = 0;
  // Main-kernel launches of the call: the epochs it advances (docs/cuda-api.md, "Rounds and epochs").
  int launches = 0;
};

// (count, dtype, bits, quantizer, group, compensator work, direction, exact_max_count): what a
// plan depends on besides the communicator.
using PlanKey = std::tuple<std::size_t, int, int, int, int, int, int, std::size_t>;

// The communicator's plan for a call of `count` elements under `spec`, made on first use (the
// current device must be the communicator's: residency is asked of CUDA).
const Plan& plan_for(Communicator* comm, std::size_t count, const AllReduceSpec& spec);
// A plan without the cache (plan_for's maker).
Plan make_plan(const Communicator& comm, std::size_t count, const AllReduceSpec& spec);

// The kernels' arguments of a call: the plan's shape, the spec's constants, this call's buffers
// and state; the round fields are set per launch by launch().
CallArgs call_args(const Communicator& comm, const Plan& plan, std::size_t count, const AllReduceSpec& spec,
                   const void* in, void* out, const CompensatorBuffers* state, float* compensated);
// Enqueues the call on `stream` (and the side stream), in the order of the plan: the wait for the
// previous call's update, the backward pre-pass, the exact or owner rounds, the update.
Status launch(Communicator* comm, const Plan& plan, CallArgs a, CompensatorBuffers* state, cudaStream_t stream);

}  // namespace echo::cuda
