// The owner kernel's tiling rule (plan_schedule), which needs no GPU: over a sweep of call shapes,
// every schedule covers its segment in rounds that fit the receive slot, cuts tiles of whole block
// iterations that the flag arrays can index, and gives ranks on differently shared GPUs the same
// tiles (flags are indexed by tile) while each sizes its own grid.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstddef>
#include <string>
#include <utility>

#include "communicator_impl.h"
#include "launch.h"

namespace {

using namespace echo;
using namespace echo::cuda;

std::string describe(const ScheduleInputs& in) {
  return "slot " + std::to_string(in.slot_bytes) + " gps " + std::to_string(in.groups_per_segment) + " g " +
         std::to_string(in.group) + " gb " + std::to_string(in.group_bytes) + " E " +
         std::to_string(in.lane_elements) + " blocks/SM " + std::to_string(in.blocks_per_sm) + " SMs " +
         std::to_string(in.sm_count) + " P " + std::to_string(in.ranks) + " on GPU " +
         std::to_string(in.ranks_on_device) + "/" + std::to_string(in.max_ranks_on_device) + " tpw " +
         std::to_string(in.tiles_per_wave) + " lags " + std::to_string(in.reduce_lag_waves) + "/" +
         std::to_string(in.tail_lag_waves);
}

// A call shape with zero-aware parameters (4 bytes per group) on 132 multiprocessors.
ScheduleInputs shape(std::size_t slot, std::size_t gps, int group, int bits, Compensation comp, int per_sm, int ranks,
                     int sharing) {
  ScheduleInputs in{};
  in.slot_bytes = slot;
  in.groups_per_segment = gps;
  in.group_bytes = static_cast<std::size_t>(group) * bits / 8;
  in.param_bytes = 4;
  in.group = group;
  in.bits = bits;
  in.lane_elements = lane_elements(bits, group, comp);
  in.blocks_per_sm = per_sm;
  in.sm_count = 132;
  in.ranks = ranks;
  in.ranks_on_device = sharing;
  in.max_ranks_on_device = sharing;
  return in;
}

void check_schedule(const ScheduleInputs& in) {
  const Schedule s = plan_schedule(in);
  const std::string where = describe(in);
  const std::size_t gpi = static_cast<std::size_t>(32 / (in.group / in.lane_elements)) * kWarpsPerBlock;
  const std::size_t gps = in.groups_per_segment;
  // Rounds: whole block iterations, covering the segment, none empty, each fitting the slot.
  BOOST_REQUIRE_MESSAGE(s.rounds >= 1 && s.round_groups % gpi == 0, where);
  BOOST_REQUIRE_MESSAGE(static_cast<std::size_t>(s.rounds) * s.round_groups >= gps, where);
  BOOST_REQUIRE_MESSAGE(static_cast<std::size_t>(s.rounds - 1) * s.round_groups < gps, where);
  BOOST_REQUIRE_MESSAGE(s.codes_bytes % 256 == 0 && s.codes_bytes >= s.round_groups * in.group_bytes, where);
  BOOST_REQUIRE_MESSAGE(s.codes_bytes + s.round_groups * in.param_bytes <= in.slot_bytes, where);
  // Tiles: whole block iterations, covering the round, none empty, within the flag arrays.
  const std::size_t tg = static_cast<std::size_t>(s.tile_groups);
  BOOST_REQUIRE_MESSAGE(tg >= gpi && tg % gpi == 0, where);
  BOOST_REQUIRE_MESSAGE(static_cast<std::size_t>(s.num_tiles) * tg >= s.round_groups, where);
  BOOST_REQUIRE_MESSAGE(static_cast<std::size_t>(s.num_tiles - 1) * tg < s.round_groups, where);
  BOOST_REQUIRE_MESSAGE(s.num_tiles >= 1 && s.num_tiles <= kMaxTilesPerRound, where);
  BOOST_REQUIRE_MESSAGE(s.lag >= 1 && s.lag <= s.num_tiles, where);
  BOOST_REQUIRE_MESSAGE(s.tail_lag >= 1 && s.tail_lag <= s.num_tiles, where);
  // Grid: at least one block, no more than this rank's share of its GPU keeps resident.
  const int share = in.sm_count * in.blocks_per_sm / in.ranks_on_device;
  BOOST_REQUIRE_MESSAGE(s.grid >= 1 && s.grid <= (share > 1 ? share : 1), where);
  // A rank alone on its GPU cuts the same tiles as one on the group's most shared GPU.
  ScheduleInputs alone = in;
  alone.ranks_on_device = 1;
  const Schedule t = plan_schedule(alone);
  BOOST_REQUIRE_MESSAGE(t.rounds == s.rounds && t.round_groups == s.round_groups && t.tile_groups == s.tile_groups &&
                            t.num_tiles == s.num_tiles && t.lag == s.lag && t.tail_lag == s.tail_lag && t.codes_bytes == s.codes_bytes,
                        where);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(owner_schedule)

BOOST_AUTO_TEST_CASE(every_schedule_covers_its_segment_within_slot_and_flags) {
  std::size_t checked = 0;
  for (std::size_t slot : {std::size_t{1} << 20, std::size_t{72} << 20, std::size_t{160} << 20}) {
    for (int group : {16, 32, 128, 512, 1024}) {
      for (int bits : {4, 8}) {
        for (Compensation comp : {Compensation::kOff, Compensation::kLocal, Compensation::kGlobal}) {
          for (int per_sm : {1, 2, 3, 4}) {
            for (int ranks = 1; ranks <= kMaxRanks; ++ranks) {
              for (int sharing : {1, 2, ranks}) {
                if (sharing > ranks) continue;
                for (std::size_t gps : {std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{65537},
                                        std::size_t{1} << 21, (std::size_t{1} << 24) + 3}) {
                  for (int tpw : {0, 1, 32, 1000}) {
                    ScheduleInputs in = shape(slot, gps, group, bits, comp, per_sm, ranks, sharing);
                    in.tiles_per_wave = tpw;
                    // The default lags and, on every other shape, lags of two and three waves.
                    in.reduce_lag_waves = checked % 2 == 0 ? 0 : 2;
                    in.tail_lag_waves = checked % 2 == 0 ? 0 : 3;
                    check_schedule(in);
                    ++checked;
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  BOOST_TEST(checked > 100000u);
}

// Lanes fit a group into one warp: 32 / (group / E) groups per warp must be a whole number >= 1.
BOOST_AUTO_TEST_CASE(lane_widths_fit_the_group_into_a_warp) {
  for (int group : {16, 32, 64, 128, 256, 512, 1024}) {
    for (int bits : {4, 8}) {
      for (Compensation comp : {Compensation::kOff, Compensation::kLocal, Compensation::kGlobal}) {
        const int e = lane_elements(bits, group, comp);
        BOOST_TEST_REQUIRE((e == 8 || e == 16 || e == 32));
        BOOST_TEST_REQUIRE(group % e == 0);
        BOOST_TEST_REQUIRE(group / e <= 32);
        BOOST_TEST_REQUIRE(32 % (group / e) == 0);
      }
    }
  }
}

// The default receive slot (CommOptions::slot_bytes = 0) keeps the slots at 576 MiB per rank up
// to P = 4 and runs a 1 GiB bf16 message at 4 bits (group 128, zero-aware parameters) in one round
// at every P, through the layout rule the communicator uses.
BOOST_AUTO_TEST_CASE(default_slot_runs_a_gib_at_four_bits_in_one_round) {
  const std::size_t count = std::size_t{1} << 29;
  const int group = 128;
  for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
    CommOptions opt;
    const WorkspaceLayout layout = make_layout(opt, ranks);
    BOOST_TEST_REQUIRE(layout.slot_bytes >= default_slot_bytes(ranks));
    const std::size_t slots = 2 * static_cast<std::size_t>(ranks) * layout.slot_bytes;
    if (ranks <= 4) BOOST_TEST(slots <= (std::size_t{576} << 20) + 2 * ranks * 256u);
    const std::size_t groups = count / group;
    const Schedule s = plan_schedule(
        shape(layout.slot_bytes, (groups + ranks - 1) / ranks, group, 4, Compensation::kOff, 2, ranks, 1));
    BOOST_TEST_INFO("P = " << ranks);
    BOOST_TEST(s.rounds == 1);
  }
}

// The default tiling cuts about 16 sqrt(n) tiles (24 sqrt(n) for 8 bits) for n block iterations per
// segment round (within the rounding to whole iterations), one iteration each when that would be
// more tiles than iterations, and never more than the flag arrays index.
BOOST_AUTO_TEST_CASE(default_tiles_grow_as_the_square_root_of_the_iterations) {
  BOOST_TEST(default_tiles_per_sqrt_iteration(4) == 16.0);
  BOOST_TEST(default_tiles_per_sqrt_iteration(8) == 24.0);
  for (const double factor : {0.0, 8.0, 32.0}) {
    for (const auto& [bits, comp] : {std::pair{4, Compensation::kOff}, std::pair{4, Compensation::kLocal},
                                     std::pair{8, Compensation::kOff}}) {
      for (const std::size_t iterations : {std::size_t{1}, std::size_t{100}, std::size_t{512}, std::size_t{2048},
                                           std::size_t{8192}, std::size_t{32768}, std::size_t{131072}}) {
        const int group = 128;
        const std::size_t gpi =
            static_cast<std::size_t>(32 / (group / lane_elements(bits, group, comp))) * kWarpsPerBlock;
        const std::size_t gps = iterations * gpi;
        ScheduleInputs in = shape(gps * (group * bits / 8 + 4) + 4096, gps, group, bits, comp,  // one round
                                  comp == Compensation::kOff ? 2 : 3, 2, 1);
        in.tiles_per_sqrt_iteration = factor;
        const Schedule s = plan_schedule(in);
        BOOST_TEST_INFO("iterations " << iterations << ", " << bits << " bits, compensation "
                                      << static_cast<int>(comp) << ", factor " << factor);
        BOOST_TEST_REQUIRE(s.rounds == 1);
        const double target =
            (factor > 0.0 ? factor : default_tiles_per_sqrt_iteration(bits)) * std::sqrt(static_cast<double>(iterations));
        const double tiles = static_cast<double>(s.num_tiles);
        if (target >= static_cast<double>(iterations)) {
          BOOST_TEST(static_cast<std::size_t>(s.tile_groups) == gpi);  // one iteration per tile
        } else if (target * 2 / 3 < kMaxTilesPerRound) {
          BOOST_TEST(tiles >= target * 2 / 3);
          BOOST_TEST(tiles <= target * 2);
        } else {
          BOOST_TEST(s.num_tiles <= kMaxTilesPerRound);
          BOOST_TEST(s.num_tiles >= kMaxTilesPerRound / 2);
        }
      }
    }
  }
}

// The exact-path switch-over defaults: the measured P = 2 values, each scaled for larger groups to
// the largest power of two that keeps the bytes each GPU sends at most those of P = 2; with the
// compensator the switch-over comes earlier (local residual earliest).
BOOST_AUTO_TEST_CASE(exact_switch_over_defaults_per_compensator) {
  CompensatorSpec off, local, global;
  off.mode = CompensatorMode::kOff;
  local.residual = ResidualMode::kLocal;
  global.residual = ResidualMode::kGlobal;
  BOOST_TEST(default_exact_max_count(2, off) == kDefaultExactMaxCount);
  BOOST_TEST(default_exact_max_count(2, global) == kDefaultExactMaxCountGlobalResidual);
  BOOST_TEST(default_exact_max_count(2, local) == kDefaultExactMaxCountLocalResidual);
  for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
    BOOST_TEST_INFO("P = " << ranks);
    const std::size_t plain = default_exact_max_count(ranks);
    BOOST_TEST(default_exact_max_count(ranks, off) == plain);
    BOOST_TEST(default_exact_max_count(ranks, global) < plain);
    BOOST_TEST(default_exact_max_count(ranks, local) < default_exact_max_count(ranks, global));
    const std::pair<std::size_t, std::size_t> cases[] = {
        {plain, kDefaultExactMaxCount},
        {default_exact_max_count(ranks, global), kDefaultExactMaxCountGlobalResidual},
        {default_exact_max_count(ranks, local), kDefaultExactMaxCountLocalResidual}};
    for (const auto& [n, at_two] : cases) {
      const std::size_t copies = static_cast<std::size_t>(ranks - 1);
      BOOST_TEST((n > 0 && (n & (n - 1)) == 0u));
      BOOST_TEST(n * copies <= at_two);
      BOOST_TEST(2 * n * copies > at_two);
    }
  }
}

// A call's default: compensated forward bf16 calls ship 16-bit terms on the exact path
// (docs/numerics.md 4) and take the uncompensated switch-over; fp16, fp32 and backward ones keep
// the compensator's earlier one.
BOOST_AUTO_TEST_CASE(exact_switch_over_default_of_a_call) {
  for (ResidualMode residual : {ResidualMode::kLocal, ResidualMode::kGlobal}) {
    for (int ranks = 2; ranks <= kMaxRanks; ++ranks) {
      BOOST_TEST_INFO("P = " << ranks << ", residual " << residual_mode_name(residual));
      AllReduceSpec spec;
      spec.dtype = DType::kBFloat16;
      spec.compensator.mode = CompensatorMode::kDual;
      spec.compensator.residual = residual;
      BOOST_TEST(default_exact_max_count(ranks, spec) == default_exact_max_count(ranks));
      const std::size_t fp32_terms = default_exact_max_count(ranks, spec.compensator);
      BOOST_TEST(fp32_terms < default_exact_max_count(ranks));
      spec.direction = Direction::kBackward;
      BOOST_TEST(default_exact_max_count(ranks, spec) == fp32_terms);
      spec.direction = Direction::kForward;
      for (DType d : {DType::kFloat16, DType::kFloat32}) {
        spec.dtype = d;
        BOOST_TEST(default_exact_max_count(ranks, spec) == fp32_terms);
      }
      spec.dtype = DType::kBFloat16;
      spec.compensator.mode = CompensatorMode::kOff;
      BOOST_TEST(default_exact_max_count(ranks, spec) == default_exact_max_count(ranks));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
