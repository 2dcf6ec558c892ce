// The device's fast paths beside the shared numerics layer give its bits for every input
// (echo/numerics/dtype_rounding.h names each one and points here).
#include <boost/test/unit_test.hpp>

#include "device_group.h"
#include "numerics_intrinsics_kernels.h"

namespace echo::test {
namespace {

void expect_equal(const char* what, const NumericsCheck& c) {
  BOOST_REQUIRE_MESSAGE(c.error == cudaSuccess, what << ": " << cudaGetErrorString(c.error));
  BOOST_TEST(c.mismatches == 0u, what << ": " << c.mismatches << " inputs differ, the first 0x" << std::hex
                                      << c.first);
}

BOOST_AUTO_TEST_CASE(conversion_instructions_match_the_shared_rounding_for_every_input) {
  if (!gpu_present()) return;
  expect_equal("fp16 round to nearest even", check_half_round_to_nearest_even());
  expect_equal("fp16 round up", check_half_round_up());
  expect_equal("fp16 to fp32", check_half_to_float());
  expect_equal("bf16 round to nearest even", check_bf16_round_to_nearest_even());
}

BOOST_AUTO_TEST_CASE(power_of_two_residual_matches_the_division_for_every_input) {
  if (!gpu_present()) return;
  expect_equal("y * (1 / P)", check_pow2_residual());
}

BOOST_AUTO_TEST_CASE(packed_codes_unpack_and_pack_every_word) {
  if (!gpu_present()) return;
  expect_equal("4-bit codes", check_packed_codes(4));
  expect_equal("8-bit codes", check_packed_codes(8));
}

}  // namespace
}  // namespace echo::test
