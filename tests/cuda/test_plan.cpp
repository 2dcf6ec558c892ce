// The plan of a call (plan.h), which needs no GPU: the launches it lists are the epochs a call
// advances (docs/cuda-api.md, "Rounds and epochs"), and ranks on differently shared GPUs plan the
// same launches, rounds and tiles (flags compare epochs and tiles across ranks), only their grids
// differing.
#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <string>

#include "communicator_impl.h"
#include "launch.h"
#include "plan.h"

namespace {

using namespace echo;
using namespace echo::cuda;

// A communicator of `ranks` ranks as creation sets it up on a GPU of 132 multiprocessors, without
// the GPU (no workspace: a plan reads only the layout and the counts).
Communicator host_only(int ranks, int ranks_on_device, int max_ranks_on_device, const CommOptions& options) {
  Communicator c;
  c.rank = 0;
  c.ranks = ranks;
  c.ranks_on_device = ranks_on_device;
  c.max_ranks_on_device = max_ranks_on_device;
  c.sm_count = 132;
  c.exact_blocks_per_sm = 4;
  c.options = options;
  c.layout = make_layout(options, ranks);
  return c;
}

AllReduceSpec spec_of(int bits, CompensatorMode mode, ResidualMode residual, Direction direction,
                      std::size_t exact_max_count) {
  AllReduceSpec s;
  s.dtype = DType::kBFloat16;
  s.quant = {bits, 128, QuantizerKind::kZeroAware};
  s.compensator.mode = mode;
  s.compensator.residual = residual;
  s.direction = direction;
  s.exact_max_count = exact_max_count;
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(call_plan)

// Launches per round: exact path 1 (peer-to-peer) or 2 (NCCL: send, reduce); owner path 1, 2 with
// the split tail, 3 over NCCL (push, reduce, tail). The split tail only on the peer-to-peer
// transport, for the compensated local-residual shapes at or above split_tail_min_count.
BOOST_AUTO_TEST_CASE(launches_are_rounds_times_launches_per_round) {
  std::size_t checked = 0;
  for (Transport transport : {Transport::kPeerToPeer, Transport::kNccl}) {
    for (std::size_t slot : {std::size_t{1} << 20, std::size_t{0}}) {
      CommOptions opt;
      opt.transport = transport;
      opt.slot_bytes = slot;
      opt.exact_capacity = std::size_t{1} << 16;
      opt.split_tail_min_count = std::size_t{1} << 20;
      for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
        const Communicator c = host_only(ranks, 1, 1, opt);
        for (int bits : {4, 8}) {
          for (CompensatorMode mode : {CompensatorMode::kOff, CompensatorMode::kDual}) {
            for (ResidualMode residual : {ResidualMode::kGlobal, ResidualMode::kLocal}) {
              for (Direction direction : {Direction::kForward, Direction::kBackward}) {
                for (std::size_t count : {std::size_t{1}, std::size_t{1000}, std::size_t{1} << 18,
                                          (std::size_t{1} << 20) + 5, std::size_t{1} << 24}) {
                  const AllReduceSpec spec = spec_of(bits, mode, residual, direction, std::size_t{1} << 18);
                  const Plan p = make_plan(c, count, spec);
                  BOOST_TEST_INFO("P " << ranks << " bits " << bits << " mode " << static_cast<int>(mode)
                                       << " residual " << static_cast<int>(residual) << " count " << count
                                       << " nccl " << (transport == Transport::kNccl) << " slot " << slot);
                  const bool nccl = transport == Transport::kNccl;
                  BOOST_TEST_REQUIRE(p.nccl == nccl);
                  BOOST_TEST_REQUIRE(p.exact == (count <= spec.exact_max_count));
                  BOOST_TEST_REQUIRE(p.backward == (direction == Direction::kBackward));
                  if (p.exact) {
                    BOOST_TEST_REQUIRE(p.exact_rounds * p.exact_capacity >= count);
                    BOOST_TEST_REQUIRE((p.exact_rounds - 1) * p.exact_capacity < count);
                    BOOST_TEST_REQUIRE(p.launches == p.exact_rounds * (nccl ? 2 : 1));
                    BOOST_TEST_REQUIRE(!p.side_update);
                  } else {
                    const bool local = mode != CompensatorMode::kOff && residual == ResidualMode::kLocal;
                    const bool split = !nccl && local && count >= opt.split_tail_min_count;
                    BOOST_TEST_REQUIRE(p.split == split);
                    BOOST_TEST_REQUIRE(p.launches == p.schedule.rounds * (nccl ? 3 : split ? 2 : 1));
                    BOOST_TEST_REQUIRE(p.side_update == (mode != CompensatorMode::kOff && !local));
                    BOOST_TEST_REQUIRE(static_cast<std::size_t>(p.schedule.rounds) * p.schedule.round_groups >=
                                       p.groups_per_segment);
                  }
                  ++checked;
                }
              }
            }
          }
        }
      }
    }
  }
  BOOST_TEST(checked > 1000u);
}

// Two ranks of one group, one alone on its GPU and one sharing it, plan the same launches: the
// same path, rounds, tiles, lags and split (flags are indexed by tile and compared by epoch).
BOOST_AUTO_TEST_CASE(ranks_on_differently_shared_gpus_plan_the_same_launches) {
  CommOptions opt;
  for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
    const Communicator alone = host_only(ranks, 1, 2, opt);
    const Communicator shared = host_only(ranks, 2, 2, opt);
    for (std::size_t count : {std::size_t{100}, std::size_t{1} << 22, std::size_t{1} << 28}) {
      for (CompensatorMode mode : {CompensatorMode::kOff, CompensatorMode::kDual}) {
        const AllReduceSpec spec = spec_of(4, mode, ResidualMode::kLocal, Direction::kForward, 1000);
        const Plan a = make_plan(alone, count, spec);
        const Plan b = make_plan(shared, count, spec);
        BOOST_TEST_INFO("P " << ranks << " count " << count << " mode " << static_cast<int>(mode));
        BOOST_TEST(a.exact == b.exact);
        BOOST_TEST(a.launches == b.launches);
        BOOST_TEST(a.exact_rounds == b.exact_rounds);
        BOOST_TEST(a.split == b.split);
        BOOST_TEST(a.schedule.rounds == b.schedule.rounds);
        BOOST_TEST(a.schedule.round_groups == b.schedule.round_groups);
        BOOST_TEST(a.schedule.tile_groups == b.schedule.tile_groups);
        BOOST_TEST(a.schedule.num_tiles == b.schedule.num_tiles);
        BOOST_TEST(a.schedule.lag == b.schedule.lag);
        BOOST_TEST(a.schedule.tail_lag == b.schedule.tail_lag);
        BOOST_TEST(a.schedule.codes_bytes == b.schedule.codes_bytes);
      }
    }
  }
}

// plan_for makes a plan once per (count, spec shape) and hands the cached one back after.
BOOST_AUTO_TEST_CASE(plans_are_cached_per_count_and_spec) {
  CommOptions opt;
  Communicator c = host_only(2, 1, 1, opt);
  const AllReduceSpec spec = spec_of(4, CompensatorMode::kOff, ResidualMode::kGlobal, Direction::kForward, 1000);
  const Plan& first = plan_for(&c, std::size_t{1} << 20, spec);
  BOOST_TEST(&plan_for(&c, std::size_t{1} << 20, spec) == &first);
  BOOST_TEST(c.plans.size() == 1u);
  (void)plan_for(&c, (std::size_t{1} << 20) + 128, spec);
  AllReduceSpec backward = spec;
  backward.direction = Direction::kBackward;
  (void)plan_for(&c, std::size_t{1} << 20, backward);
  BOOST_TEST(c.plans.size() == 3u);
}

BOOST_AUTO_TEST_SUITE_END()
