// can_implement: what the CUDA path accepts, decided without a GPU (built in every build).
#include <boost/test/unit_test.hpp>

#include "echo/cuda/can_implement.h"

namespace echo::cuda {
namespace {

BOOST_AUTO_TEST_CASE(four_and_eight_bit_owner_specs_are_implemented) {
  AllReduceSpec spec;
  for (int bits : {4, 8}) {
    spec.quant.bits = bits;
    for (int ranks = 1; ranks <= kMaxRanks; ++ranks) BOOST_TEST(can_implement(spec, ranks).ok());
  }
}

BOOST_AUTO_TEST_CASE(other_bit_widths_and_the_ring_are_unsupported) {
  AllReduceSpec spec;
  for (int bits : {2, 3, 5, 6, 7}) {
    spec.quant.bits = bits;
    const Status s = can_implement(spec, 2);
    BOOST_TEST((s.code() == StatusCode::kUnsupported));
    BOOST_TEST(s.message() == "the CUDA path implements bits 4 and 8, got " + std::to_string(bits));
  }
  spec.quant.bits = 4;
  spec.algorithm = Algorithm::kRing;
  spec.compensator.residual = ResidualMode::kGlobal;
  const Status s = can_implement(spec, 2);
  BOOST_TEST((s.code() == StatusCode::kUnsupported));
  BOOST_TEST(s.message() == "the CUDA path implements the owner algorithm only, got ring");
}

BOOST_AUTO_TEST_CASE(wide_groups_and_rotation_are_implemented) {
  AllReduceSpec spec;
  for (OverflowGroups overflow : {OverflowGroups::kPoison, OverflowGroups::kWide}) {
    for (Rotation rotation : {Rotation::kNone, Rotation::kHadamard}) {
      for (int bits : {4, 8}) {
        for (QuantizerKind kind : {QuantizerKind::kZeroAware, QuantizerKind::kNaive, QuantizerKind::kSymmetric}) {
          for (CompensatorMode mode : {CompensatorMode::kOff, CompensatorMode::kSingle, CompensatorMode::kDual}) {
            spec.quant.overflow = overflow;
            spec.quant.rotation = rotation;
            spec.quant.bits = bits;
            spec.quant.kind = kind;
            spec.compensator.mode = mode;
            for (int ranks = 1; ranks <= kMaxRanks; ++ranks) BOOST_TEST(can_implement(spec, ranks).ok());
          }
        }
      }
    }
  }
  // They do not lift the other limits.
  spec.quant.bits = 3;
  BOOST_TEST((can_implement(spec, 2).code() == StatusCode::kUnsupported));
}

BOOST_AUTO_TEST_CASE(outliers_are_cpu_reference_only) {
  AllReduceSpec spec;
  spec.quant.outliers = 1;
  spec.quant.overflow = OverflowGroups::kWide;
  spec.quant.rotation = Rotation::kHadamard;
  const Status s = can_implement(spec, 2);
  BOOST_TEST((s.code() == StatusCode::kUnsupported));
  BOOST_TEST(s.message().find("outliers 0 only") != std::string::npos);
  BOOST_TEST(s.message().find("CPU reference only), got 1") != std::string::npos);
  spec.quant.outliers = 3;  // invalid, not merely unsupported
  BOOST_TEST((can_implement(spec, 2).code() == StatusCode::kInvalidArgument));
}

BOOST_AUTO_TEST_CASE(stream_units_are_refused_by_the_peer_to_peer_kernels) {
  AllReduceSpec spec;
  spec.compensator.units = CompensatorUnits::kStream;
  const Status s = can_implement(spec, 4);
  BOOST_TEST((s.code() == StatusCode::kUnsupported));
  BOOST_TEST(s.message().find("implements compensator units 'site' only in its peer-to-peer kernels") != std::string::npos);
  // Calls that take unit gains (backward, the compensator off) need no site: implemented.
  spec.direction = Direction::kBackward;
  BOOST_TEST(can_implement(spec, 4).ok());
  spec.direction = Direction::kForward;
  spec.compensator.mode = CompensatorMode::kOff;
  BOOST_TEST(can_implement(spec, 4).ok());
}

// Compensator 'deficit' (docs/numerics.md 6.2) runs in the one-GPU emulation alone: refused in either
// direction (a backward call needs no site, so the units' check would let it through), naming the
// mode.
BOOST_AUTO_TEST_CASE(the_deficit_loop_is_refused_by_the_peer_to_peer_kernels) {
  AllReduceSpec spec;
  spec.compensator.mode = CompensatorMode::kDeficit;
  spec.compensator.units = CompensatorUnits::kStream;
  spec.compensator.residual = ResidualMode::kLocal;
  spec.compensator.gains = CompensatorGains::kSum;
  for (Direction direction : {Direction::kForward, Direction::kBackward}) {
    for (DType state : {DType::kFloat32, DType::kBFloat16}) {
      spec.direction = direction;
      spec.compensator.state_dtype = state;
      const Status s = can_implement(spec, 4);
      BOOST_TEST((s.code() == StatusCode::kUnsupported));
      BOOST_TEST(s.message().find("implements compensator 'deficit'") != std::string::npos);
      BOOST_TEST(s.message().find("not in its peer-to-peer kernels") != std::string::npos);
    }
  }
  // Settings the mode does not run with are invalid before they are unsupported.
  spec.compensator.residual = ResidualMode::kGlobal;
  BOOST_TEST((can_implement(spec, 4).code() == StatusCode::kInvalidArgument));
}

BOOST_AUTO_TEST_CASE(invalid_specs_are_invalid_arguments_first) {
  AllReduceSpec spec;
  spec.quant.bits = 9;  // invalid, not merely unsupported
  BOOST_TEST((can_implement(spec, 2).code() == StatusCode::kInvalidArgument));
  spec.quant.bits = 4;
  BOOST_TEST((can_implement(spec, 0).code() == StatusCode::kInvalidArgument));
  BOOST_TEST((can_implement(spec, kMaxRanks + 1).code() == StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace echo::cuda
