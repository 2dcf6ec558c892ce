// Every group of checks passes on this build, and a wrong claim is caught: a check that cannot
// fail proves nothing.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include <Eigen/Core>

#include "echo/ema_kernel.h"
#include "echo/proofs/check.h"
#include "echo/proofs/report.h"
#include "echo/synthetic/random.h"
#include "tail_and_remainder_checks.h"
#include "reference_channel.h"

using namespace echo;
using namespace echo::proofs;

namespace {
// No check of the group fails, and at least one passes (a group of skips and infos proves nothing).
void expect_no_failure(const std::vector<CheckResult>& results) {
  BOOST_TEST(!results.empty());
  std::size_t passed = 0;
  for (const CheckResult& r : results) {
    BOOST_TEST((r.verdict != Verdict::kFail), r.name << ": " << r.measured);
    passed += r.verdict == Verdict::kPass;
  }
  BOOST_TEST(passed > 0u);
}
struct SingleThread {
  SingleThread() { Eigen::setNbThreads(1); }
};
}  // namespace

BOOST_AUTO_TEST_SUITE(proofs)

BOOST_FIXTURE_TEST_CASE(constants_pass, SingleThread) { expect_no_failure(constant_checks()); }
BOOST_FIXTURE_TEST_CASE(source_pass, SingleThread) { expect_no_failure(source_checks()); }
BOOST_FIXTURE_TEST_CASE(noise_pass, SingleThread) { expect_no_failure(noise_checks()); }
BOOST_FIXTURE_TEST_CASE(linear_pass, SingleThread) { expect_no_failure(linear_checks()); }
BOOST_FIXTURE_TEST_CASE(propagation_pass, SingleThread) { expect_no_failure(propagation_checks()); }
BOOST_FIXTURE_TEST_CASE(backward_pass, SingleThread) { expect_no_failure(backward_checks()); }
BOOST_FIXTURE_TEST_CASE(tail_and_remainder_pass, SingleThread) { expect_no_failure(tail_and_remainder_checks()); }

BOOST_AUTO_TEST_CASE(trace_checks_run_on_the_example_and_skip_missing) {
  ProveOptions o;
  o.traces = {std::string(ECHO_SOURCE_DIR) + "/data/examples/synthetic_p4.h5", "/nonexistent/trace.h5"};
  const auto results = trace_checks(o);
  expect_no_failure(results);
  bool skipped_missing = false, passed = false;
  for (const auto& r : results) {
    skipped_missing |= r.verdict == Verdict::kSkip && r.note.find("not present") != std::string::npos;
    passed |= r.verdict == Verdict::kPass;
  }
  BOOST_TEST(skipped_missing);
  BOOST_TEST(passed);
}

// The pre-norm premise: PASS on SmolLM2's trace (post_norm none), a named WARN on Gemma 3's (its
// post-norms' gains spread over four orders of magnitude), never a FAIL.
BOOST_AUTO_TEST_CASE(the_pre_norm_premise_holds_for_smollm2_and_not_for_gemma3) {
  ProveOptions o;
  o.traces = {std::string(ECHO_SOURCE_DIR) + "/data/smollm2/trace-p4-moby-2x16.h5",
              std::string(ECHO_SOURCE_DIR) + "/data/gemma3/trace-gemma3-p4-moby-2x16.h5"};
  const auto results = trace_checks(o);
  expect_no_failure(results);
  int seen = 0;
  for (const auto& r : results) {
    if (r.name == "trace.trace-p4-moby-2x16.prenorm") {
      BOOST_TEST((r.verdict == Verdict::kPass));
      BOOST_TEST(r.measured == 1.0);
      ++seen;
    }
    if (r.name == "trace.trace-gemma3-p4-moby-2x16.prenorm") {
      BOOST_TEST((r.verdict == Verdict::kWarn));
      BOOST_TEST(r.measured > 1000.0);
      BOOST_TEST(r.note.find("POST-NORM") != std::string::npos);
      ++seen;
    }
  }
  BOOST_TEST(seen == 2);
}

// A trace whose data holds a non-finite value is not checked on it: one FAIL naming the value,
// and no verdict on the theorems (they would pass on the NaN-free remainder or on zeros).
BOOST_AUTO_TEST_CASE(trace_checks_fail_on_nonfinite_data) {
  ProveOptions o;
  o.traces = {std::string(ECHO_SOURCE_DIR) + "/tests/data/bad_nonfinite.h5"};
  const auto results = trace_checks(o);
  bool data_failed = false;
  for (const auto& r : results) {
    if (r.name == "trace.bad_nonfinite.data") {
      data_failed = r.verdict == Verdict::kFail && r.note.find("non-finite value nan in '/contributions' at pass 1, site 2, rank 3, index 17") != std::string::npos;
    }
    BOOST_TEST(r.name.find("trace.bad_nonfinite.eq21") == std::string::npos);
  }
  BOOST_TEST(data_failed);
}

BOOST_AUTO_TEST_CASE(verdicts) {
  BOOST_TEST((at_most("a", "", 1.0, 1.0).verdict == Verdict::kPass));
  BOOST_TEST((at_most("a", "", 1.0 + 1e-15, 1.0).verdict == Verdict::kFail));
  BOOST_TEST((at_most("a", "", std::nan(""), 1.0).verdict == Verdict::kFail));  // NaN never passes
  BOOST_TEST((within("a", "", 1.1, 1.0, 0.05).verdict == Verdict::kFail));
  BOOST_TEST((exactly("a", "", 56.0, 56.0).verdict == Verdict::kPass));
  BOOST_TEST(count_failures({at_most("a", "", 2, 1), at_least("b", "", 2, 1)}) == 1u);
}

BOOST_AUTO_TEST_CASE(a_wrong_bound_is_caught) {
  // The constant adversary against the default kernel exceeds a Theorem 1 bound computed with a
  // shorter memory (beta1 = 0.5): the check must say FAIL.
  CompensatorSpec spec;
  spec.eta = 1.0f;
  const SourceRun run = run_adversary(
      spec, 4, 16, 56, [](std::size_t, std::vector<std::vector<float>>& x) { for (auto& r : x) std::fill(r.begin(), r.end(), 0.0f); },
      [](std::size_t, const Eigen::VectorXd&, const Eigen::VectorXd&) { return Eigen::VectorXd(Eigen::VectorXd::Ones(16) * 0.25); });
  CompensatorSpec wrong = spec;
  wrong.beta1 = 0.5f;
  const double q = 1.0;  // ||0.25 * ones(16)|| = 1
  const CheckResult r = at_most("thm1.wrong", "", max_partial_sum(run), EmaKernel::from(wrong).partial_sum_bound(56, q));
  BOOST_TEST((r.verdict == Verdict::kFail));
}

BOOST_AUTO_TEST_CASE(a_wrong_tail_bound_is_caught) {
  // ||g||^2 / d of a standard normal g in R^32 has mean 1 and exceeds 1 about 45 % of the time:
  // "<= 1 with probability >= 0.9" is wrong and must FAIL, "<= 3 with probability >= 0.9" holds
  // (its 0.9 quantile is about 1.33) and must PASS.
  synthetic::Random rng(5);
  std::vector<double> draws(1000);
  for (double& x : draws) x = rng.normal_matrix(32, 1, 1.0).squaredNorm() / 32.0;
  BOOST_TEST((exceeds_with_probability_at_most("tail.wrong", "", draws, 1.0, 0.1).verdict == Verdict::kFail));
  BOOST_TEST((exceeds_with_probability_at_most("tail.right", "", draws, 3.0, 0.1).verdict == Verdict::kPass));
}

BOOST_AUTO_TEST_CASE(json_is_written) {
  const std::string path = std::string(ECHO_BINARY_DIR) + "/test_prove_" + std::to_string(getpid()) + ".json";
  BOOST_REQUIRE(write_json(path, {at_most("x", "s \"quoted\"", 1, 2)}, {{"curve", {1.0, 2.0}}}).ok());
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  BOOST_TEST(ss.str().find("\"s \\\"quoted\\\"\"") != std::string::npos);
  BOOST_TEST(ss.str().find("\"curve\": [1, 2]") != std::string::npos);
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_SUITE_END()
