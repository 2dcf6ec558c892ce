// The plan of a call (plan.h): the tiling rule, the plan made once per message size and spec, and
// the communicator's cache of plans.
#include "plan.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "communicator_impl.h"
#include "launch.h"

namespace echo::cuda {
namespace {

std::size_t align_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

}  // namespace

Schedule plan_schedule(const ScheduleInputs& in) {
  Schedule s{};
  const std::size_t gb = in.group_bytes;
  const std::size_t pb = in.param_bytes;
  const int groups_per_iter = (32 / (in.group / in.lane_elements)) * kWarpsPerBlock;
  // Slot capacity in whole block iterations, leaving room to align the parameter region.
  std::size_t cap = (in.slot_bytes - 256) / (gb + pb);
  cap = std::max<std::size_t>(cap / groups_per_iter * groups_per_iter, groups_per_iter);
  const std::size_t gps = in.groups_per_segment;
  s.rounds = static_cast<int>(std::max<std::size_t>(1, (gps + cap - 1) / cap));
  s.round_groups = align_up((gps + s.rounds - 1) / s.rounds, groups_per_iter);
  s.codes_bytes = align_up(cap * gb, 256);
  // Tiles and lag must be the same on every rank (flags are indexed by tile): derive them from
  // the group's most shared GPU; only the grid follows this rank's own GPU.
  const int resident_tiling = std::max(1, in.sm_count * in.blocks_per_sm / in.max_ranks_on_device);
  const int resident = std::max(1, in.sm_count * in.blocks_per_sm / in.ranks_on_device);
  const int jobs_per_step = 2 * in.ranks - 1;
  const int per_wave = std::max(1, resident_tiling / jobs_per_step);
  std::size_t tg;
  if (in.tiles_per_wave > 0) {
    const std::size_t target_tiles = static_cast<std::size_t>(per_wave) * in.tiles_per_wave;
    tg = align_up(std::max<std::size_t>(1, (s.round_groups + target_tiles - 1) / target_tiles), groups_per_iter);
  } else {
    // About default_tiles_per_sqrt_iteration(bits) * sqrt(iterations) tiles, each of a whole
    // number of block iterations (rounded to the nearest, at least one).
    const double factor =
        in.tiles_per_sqrt_iteration > 0.0 ? in.tiles_per_sqrt_iteration : default_tiles_per_sqrt_iteration(in.bits);
    const double iterations = static_cast<double>(s.round_groups / groups_per_iter);
    const double per_tile = iterations / (factor * std::sqrt(iterations));
    const std::size_t its = std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(per_tile)));
    tg = its * static_cast<std::size_t>(groups_per_iter);
  }
  while ((s.round_groups + tg - 1) / tg > static_cast<std::size_t>(kMaxTilesPerRound)) tg += groups_per_iter;
  s.tile_groups = static_cast<int>(tg);
  s.num_tiles = static_cast<int>((s.round_groups + tg - 1) / tg);
  const auto waves = [&](int w) {
    return std::max(1, std::min(per_wave * (w > 0 ? w : kDefaultLagWaves), s.num_tiles));
  };
  s.lag = waves(in.reduce_lag_waves);
  s.tail_lag = waves(in.tail_lag_waves);
  const long long jobs = static_cast<long long>(s.num_tiles + s.lag + s.tail_lag) * jobs_per_step;
  s.grid = static_cast<int>(std::min<long long>(resident, jobs));
  return s;
}

Plan make_plan(const Communicator& comm, std::size_t count, const AllReduceSpec& spec) {
  Plan p;
  const Segmentation seg(count, spec.quant.group, comm.ranks);
  p.groups_per_segment = seg.groups_per_segment;
  p.num_groups = seg.num_groups;
  // The NCCL transport shares no memory between ranks: the backward scale words and the exact
  // path's lines travel through NCCL as well.
  p.nccl = comm.options.transport == Transport::kNccl;
  p.backward = spec.direction == Direction::kBackward;
  p.backward_grid = std::max(static_cast<int>(std::min<std::size_t>(std::max(1, comm.sm_count / comm.ranks_on_device),
                                                                    (count + 4095) / 4096)),
                             1);
  p.exact = count <= spec.exact_max_count;
  const CompensatorSpec& cs = spec.compensator;
  const Compensation comp = compensation_of(cs.mode, cs.residual);
  if (p.exact) {
    p.exact_capacity = comm.layout.exact_capacity;
    p.exact_rounds = static_cast<int>((count + p.exact_capacity - 1) / p.exact_capacity);
    p.exact_resident = std::max(1, comm.sm_count * comm.exact_blocks_per_sm / comm.ranks_on_device);
    // P2P: one launch per round; NCCL: a send launch and a reduce launch.
    p.launches = p.exact_rounds * (p.nccl ? 2 : 1);
    return p;
  }
  ScheduleInputs in{};
  in.slot_bytes = comm.layout.slot_bytes;
  in.groups_per_segment = p.groups_per_segment;
  in.group_bytes = static_cast<std::size_t>(spec.quant.group) * spec.quant.bits / 8;
  in.param_bytes = spec.quant.param_bytes();
  in.group = spec.quant.group;
  in.bits = spec.quant.bits;
  in.lane_elements = lane_elements(spec.quant.bits, spec.quant.group, comp);
  in.blocks_per_sm = owner_allreduce_blocks_per_sm(spec.dtype, spec.quant.bits, spec.quant.group, comp);
  in.sm_count = comm.sm_count;
  in.ranks = comm.ranks;
  in.ranks_on_device = comm.ranks_on_device;
  in.max_ranks_on_device = comm.max_ranks_on_device;
  in.tiles_per_wave = comm.options.tiles_per_wave;
  in.tiles_per_sqrt_iteration = comm.options.tiles_per_sqrt_iteration;
  in.reduce_lag_waves = comm.options.reduce_lag_waves;
  in.tail_lag_waves = comm.options.tail_lag_waves;
  p.schedule = plan_schedule(in);
  // P2P: one launch per round, or two where the call shape runs its tail in a kernel of its own;
  // NCCL: a launch per stage (push, reduce, tail).
  p.split = !p.nccl && owner_allreduce_splits_tail(spec.quant.bits, spec.quant.group, comp, count,
                                                   comm.options.split_tail_min_count);
  p.launches = p.schedule.rounds * (p.nccl ? 3 : p.split ? 2 : 1);
  p.side_update = comp == Compensation::kGlobal;
  p.update_grid = std::max(1, comm.sm_count * kAuxBlocksPerSm / comm.ranks_on_device);
  return p;
}

const Plan& plan_for(Communicator* comm, std::size_t count, const AllReduceSpec& spec) {
  const Compensation comp = compensation_of(spec.compensator.mode, spec.compensator.residual);
  const PlanKey key{count, static_cast<int>(spec.dtype), spec.quant.bits, static_cast<int>(spec.quant.kind),
                    spec.quant.group, static_cast<int>(comp), static_cast<int>(spec.direction),
                    spec.exact_max_count};
  auto it = comm->plans.find(key);
  if (it != comm->plans.end()) return it->second;
  return comm->plans.emplace(key, make_plan(*comm, count, spec)).first->second;
}

}  // namespace echo::cuda
