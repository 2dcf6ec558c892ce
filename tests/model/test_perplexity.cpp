// Window placement and the negative log-likelihood of a window, on inputs with known answers.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include "echo/model/perplexity.h"

using echo::model::Matrix;
using echo::model::plan_windows;
using echo::model::summarize_perplexity;
using echo::model::window_nll;

BOOST_AUTO_TEST_SUITE(perplexity)

BOOST_AUTO_TEST_CASE(windows_are_spread_and_disjoint) {
  std::vector<std::size_t> starts;
  BOOST_REQUIRE(plan_windows(1000, 4, 100, &starts).ok());
  BOOST_TEST(starts == (std::vector<std::size_t>{0, 300, 600, 900}), boost::test_tools::per_element());
  BOOST_REQUIRE(plan_windows(100, 1, 100, &starts).ok());
  BOOST_TEST(starts == (std::vector<std::size_t>{0}), boost::test_tools::per_element());
  BOOST_TEST(!plan_windows(399, 4, 100, &starts).ok());
  BOOST_TEST(!plan_windows(1000, 0, 100, &starts).ok());
  BOOST_TEST(!plan_windows(1000, 2, 1, &starts).ok());
}

BOOST_AUTO_TEST_CASE(uniform_logits_give_log_vocab) {
  // Exact up to the rounding of log(): every prediction costs log(V).
  Matrix logits = Matrix::Constant(4, 8, 2.5f);
  const double nll = window_nll(logits, {1, 2, 3, 4});
  BOOST_TEST(nll == 3.0 * std::log(8.0), boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(known_two_way_softmax) {
  // Row 0 predicts token 1 with logits (0, log 3): p = 3/4.
  Matrix logits = Matrix::Zero(2, 2);
  logits(0, 1) = static_cast<float>(std::log(3.0));
  const double nll = window_nll(logits, {0, 1});
  BOOST_TEST(nll == -std::log(0.75), boost::test_tools::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(summary_interval_brackets_the_estimate) {
  const auto s = summarize_perplexity({10.0, 12.0, 11.0}, {5, 5, 5});
  BOOST_TEST(s.predictions == 15u);
  BOOST_TEST(s.mean_nll == 33.0 / 15.0, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(s.perplexity == std::exp(2.2), boost::test_tools::tolerance(1e-12));
  // Window means 2.0, 2.4, 2.2: standard deviation 0.2, standard error 0.2 / sqrt(3).
  BOOST_TEST(s.nll_stderr == 0.2 / std::sqrt(3.0), boost::test_tools::tolerance(1e-9));
  BOOST_TEST(s.ci_low < s.perplexity);
  BOOST_TEST(s.ci_high > s.perplexity);
  BOOST_TEST(std::log(s.ci_high) - 2.2 == 4.303 * 0.2 / std::sqrt(3.0),
             boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_SUITE_END()
