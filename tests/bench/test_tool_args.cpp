// The compensator names of the bench tools (echo_cuda_stage_probe, echo_cuda_job_trace): each name
// sets mode, residual and state type whatever the spec held before, and an unknown name is refused
// without touching the spec. Needs no GPU.
#include <boost/test/unit_test.hpp>

#include <string>

#include "compensator_name.h"

namespace {

using namespace echo;

struct Expected {
  const char* name;
  CompensatorMode mode;
  ResidualMode residual;
  DType state;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(tool_args)

BOOST_AUTO_TEST_CASE(each_compensator_name_sets_every_field_it_decides) {
  const Expected cases[] = {
      {"off", CompensatorMode::kOff, ResidualMode::kLocal, DType::kFloat32},
      {"dual", CompensatorMode::kDual, ResidualMode::kLocal, DType::kFloat32},
      {"dual-bf16", CompensatorMode::kDual, ResidualMode::kLocal, DType::kBFloat16},
      {"global", CompensatorMode::kDual, ResidualMode::kGlobal, DType::kFloat32},
      {"global-bf16", CompensatorMode::kDual, ResidualMode::kGlobal, DType::kBFloat16},
  };
  for (const Expected& e : cases) {
    BOOST_TEST_INFO("name " << e.name);
    // Start from a spec that differs in every field the name decides.
    CompensatorSpec spec;
    spec.mode = CompensatorMode::kSingle;
    spec.residual = e.residual == ResidualMode::kLocal ? ResidualMode::kGlobal : ResidualMode::kLocal;
    spec.state_dtype = e.state == DType::kFloat32 ? DType::kBFloat16 : DType::kFloat32;
    BOOST_TEST_REQUIRE(cuda::tools::compensator_from_name(e.name, &spec));
    BOOST_TEST(static_cast<int>(spec.mode) == static_cast<int>(e.mode));
    if (e.mode != CompensatorMode::kOff) BOOST_TEST(static_cast<int>(spec.residual) == static_cast<int>(e.residual));
    BOOST_TEST(static_cast<int>(spec.state_dtype) == static_cast<int>(e.state));
  }
}

BOOST_AUTO_TEST_CASE(off_overrides_the_default_dual_compensator) {
  CompensatorSpec spec;  // AllReduceSpec's default: the dual compensator
  BOOST_TEST_REQUIRE((spec.mode == CompensatorMode::kDual));
  BOOST_TEST_REQUIRE(cuda::tools::compensator_from_name("off", &spec));
  BOOST_TEST((spec.mode == CompensatorMode::kOff));
}

BOOST_AUTO_TEST_CASE(unknown_names_are_refused_and_leave_the_spec) {
  for (const std::string name : {"", "Off", "dual-bf", "local", "global-bf16x", "single"}) {
    BOOST_TEST_INFO("name '" << name << "'");
    CompensatorSpec spec;
    spec.mode = CompensatorMode::kSingle;
    spec.state_dtype = DType::kBFloat16;
    BOOST_TEST(!cuda::tools::compensator_from_name(name, &spec));
    BOOST_TEST((spec.mode == CompensatorMode::kSingle));
    BOOST_TEST((spec.state_dtype == DType::kBFloat16));
  }
}

BOOST_AUTO_TEST_SUITE_END()
