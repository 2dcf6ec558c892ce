// The compensator study: the grid of settings, and its rows on the bundled trace.
#include <boost/test/unit_test.hpp>

#include "echo/synthetic/study.h"

using namespace echo;
using namespace echo::synthetic;

BOOST_AUTO_TEST_SUITE(study)

BOOST_AUTO_TEST_CASE(grid_covers_every_setting) {
  const auto grid = compensator_grid({0.5f, 1.0f}, CompensatorSpec{});
  BOOST_TEST(grid.size() == 1u + 2u * 2u * 2u);  // off + {single, dual} x {global, local} x gains
  BOOST_TEST(grid[0].label == "off");
  BOOST_TEST(grid.back().label == "dual/local/1");
}

BOOST_AUTO_TEST_CASE(trace_rows_respect_eq21) {
  TraceReader trace;
  BOOST_REQUIRE(trace.open(std::string(ECHO_SOURCE_DIR) + "/data/examples/synthetic_p4.h5").ok());
  std::vector<StudyRow> rows;
  BOOST_REQUIRE(study_trace(trace, AllReduceSpec{}, compensator_grid({0.75f, 1.0f}, CompensatorSpec{}), &rows).ok());
  BOOST_TEST(rows.size() == 9u);
  for (const StudyRow& r : rows) {
    BOOST_TEST(r.q > 0.0);
    // Eq. 21 holds by the triangle inequality; 1e-5 covers fp32 rounding in the compensator.
    BOOST_TEST(r.max_partial_sum <= r.bound * (1.0 + 1e-5), r.setting);
  }
  // Off: the partial sum is not reduced; compensation reduces it on this trace.
  BOOST_TEST(rows[0].max_partial_sum > rows[2].max_partial_sum);
}

BOOST_AUTO_TEST_SUITE_END()
