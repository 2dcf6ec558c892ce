// The float64 error process against the kernel's closed forms (Lemma 1, Eq. 13).
#include <boost/test/unit_test.hpp>

#include "echo/synthetic/error_process.h"
#include "echo/synthetic/random.h"

using namespace echo;

namespace {
// Both sides are sums of <= 40 terms of size <= 1 in float64: 1e-12 is ~100x their rounding.
constexpr double kTol = 1e-12;
}  // namespace

BOOST_AUTO_TEST_SUITE(error_process)

BOOST_AUTO_TEST_CASE(partial_sums_follow_the_tail_representation) {
  synthetic::Random rng(3);
  const Eigen::MatrixXd delta = rng.normal_matrix(8, 40, 1.0);
  for (double eta : {1.0, 0.75, 0.0}) {
    EmaKernel k = EmaKernel::from(CompensatorSpec{});
    k.eta = eta;
    const synthetic::ErrorProcess p = synthetic::compensate(k, delta);
    for (Eigen::Index t = 0; t < delta.cols(); ++t) {
      Eigen::VectorXd expected = Eigen::VectorXd::Zero(8);
      for (Eigen::Index s = 0; s <= t; ++s) expected += k.phi(static_cast<std::size_t>(t - s)) * delta.col(s);
      BOOST_TEST((p.partial_sum.col(t) - expected).norm() <= kTol * (1.0 + expected.norm()));
    }
  }
}

BOOST_AUTO_TEST_CASE(off_has_no_correction_exactly) {
  synthetic::Random rng(4);
  const Eigen::MatrixXd delta = rng.normal_matrix(5, 10, 1.0);
  EmaKernel k = EmaKernel::from(CompensatorSpec{});
  k.eta = 0.0;
  const synthetic::ErrorProcess p = synthetic::compensate(k, delta);
  BOOST_TEST(p.correction.cwiseAbs().maxCoeff() == 0.0);
  BOOST_TEST((p.net_error - delta).cwiseAbs().maxCoeff() == 0.0);
}

BOOST_AUTO_TEST_CASE(unrolled_phi_is_the_closed_form) {
  EmaKernel k = EmaKernel::from(CompensatorSpec{});
  k.eta = 1.0;
  BOOST_TEST(synthetic::unrolled_phi(k, 0) == 1.0);
  for (std::size_t m = 1; m < 30; ++m) BOOST_TEST(std::abs(synthetic::unrolled_phi(k, m) - k.tail(m)) <= kTol);
}

BOOST_AUTO_TEST_CASE(sphere_draws_have_the_radius) {
  synthetic::Random rng(5);
  for (int i = 0; i < 10; ++i) BOOST_TEST(std::abs(rng.on_sphere(7, 2.5).norm() - 2.5) <= kTol);
  synthetic::Random a(9), b(9);
  BOOST_TEST(a.next_u64() == b.next_u64());  // seeded: reproducible
}

BOOST_AUTO_TEST_SUITE_END()
