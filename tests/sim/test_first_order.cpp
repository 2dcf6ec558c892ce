// Covariance propagation of the first-order deviation against cases with a known answer.
#include <boost/test/unit_test.hpp>

#include "echo/synthetic/constructions.h"
#include "echo/synthetic/first_order.h"

using namespace echo;
using namespace echo::synthetic;

namespace {
constexpr double kTol = 1e-10;  // float64 sums of <= 64 terms of size <= 64

// F_k = 0: no propagation, so E_k = S_{k-1} and E||E_k||^2 = q^2 sum_{m<k} phi_m^2 (Remark 1).
class Still final : public ResidualNetwork {
 public:
  std::size_t dimension() const override { return 4; }
  std::size_t depth() const override { return 64; }
  Eigen::VectorXd initial_state() const override { return Eigen::VectorXd::Ones(4); }
  Eigen::VectorXd block(std::size_t, const Eigen::VectorXd& z) const override { return Eigen::VectorXd::Zero(z.size()); }
  Eigen::MatrixXd jvp(std::size_t, const Eigen::VectorXd&, const Eigen::MatrixXd& v) const override {
    return Eigen::MatrixXd::Zero(v.rows(), v.cols());
  }
};
}  // namespace

BOOST_AUTO_TEST_SUITE(first_order)

BOOST_AUTO_TEST_CASE(without_propagation_it_is_remark_1) {
  for (double eta : {0.0, 0.75, 1.0}) {
    EmaKernel k = EmaKernel::from(CompensatorSpec{});
    k.eta = eta;
    const FirstOrderProfile p = first_order_profile(Still(), k, 2.0, false);
    for (std::size_t n = 1; n <= 64; ++n) {
      const double expected = 4.0 * k.phi_square_sum(n - 1);
      BOOST_TEST(std::abs(p.mean_square[n] - expected) <= kTol * expected);
    }
  }
}

BOOST_AUTO_TEST_CASE(rotation_network_meets_r2) {
  const RotationNetwork net(16, 32, 1.0, 5);
  EmaKernel k = EmaKernel::from(CompensatorSpec{});
  const FirstOrderProfile p = first_order_profile(net, k, 1.0, true);
  BOOST_TEST(p.c0 <= 1.0 + kTol);  // ||J||_F^2 / d <= s^2 / sigma^2 = Delta / sigma^2
  BOOST_TEST(p.mean_square.back() > 0.0);
}

BOOST_AUTO_TEST_SUITE_END()
