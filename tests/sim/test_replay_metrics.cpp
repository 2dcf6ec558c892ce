// replay_trace's result file: the datasets of the foundation keep their names, and the added
// metrics (C_k, T_m, phi_m, sigma_k, relative deviation) are consistent with them.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <unistd.h>

#include <H5Cpp.h>

#include "echo/replay.h"

using namespace echo;

namespace {
const std::string kExample = std::string(ECHO_SOURCE_DIR) + "/data/examples/synthetic_p4.h5";

std::vector<double> read_all(const H5::H5File& f, const std::string& name) {
  H5::DataSet ds = f.openDataSet(name);
  const hssize_t n = ds.getSpace().getSimpleExtentNpoints();
  std::vector<double> v(static_cast<std::size_t>(n));
  ds.read(v.data(), H5::PredType::NATIVE_DOUBLE);
  return v;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(replay_metrics)

BOOST_AUTO_TEST_CASE(example_trace_metrics) {
  TraceReader trace;
  BOOST_REQUIRE(trace.open(kExample).ok());
  ReplayOptions options;
  auto backend = make_cpu_backend(AllReduceSpec{}, trace.info().ranks);
  const std::string out = std::string(ECHO_BINARY_DIR) + "/test_replay_" + std::to_string(getpid()) + ".h5";
  ReplaySummary s;
  BOOST_REQUIRE(replay_trace(trace, out, options, *backend, &s).ok());
  {
    H5::H5File f(out, H5F_ACC_RDONLY);
    for (const char* name : {"/net_error", "/injected_error", "/partial_sum_norm", "/injected_norm",
                             "/correction_norm", "/tail", "/phi", "/sigma", "/relative_deviation"}) {
      BOOST_TEST(f.nameExists(name), name);
    }
    for (const char* attr : {"q", "mu_w", "tau_2", "max_partial_sum", "bound", "remark1_bound"}) {
      BOOST_TEST(f.attrExists(attr), attr);
    }
    const auto tail = read_all(f, "/tail");
    BOOST_TEST(tail[0] == 1.0);
    const auto ps = read_all(f, "/partial_sum_norm");
    const auto rel = read_all(f, "/relative_deviation");
    const auto sigma = read_all(f, "/sigma");
    const std::size_t sites = trace.info().sites, n = trace.info().count;
    // relative deviation = ||S_t|| / (sqrt(n) sigma_{t+1}), pass 0, site 3.
    BOOST_TEST(std::abs(rel[3] - ps[3] / (std::sqrt(static_cast<double>(n)) * sigma[4])) <= 1e-12 * rel[3]);
    BOOST_TEST(rel.size() == trace.info().passes * sites);
  }
  BOOST_TEST(s.mean_correction_norm > 0.0);
  BOOST_TEST(s.max_relative_deviation > 0.0);
  BOOST_TEST(s.max_partial_sum <= s.bound);
  std::remove(out.c_str());
}

BOOST_AUTO_TEST_SUITE_END()
