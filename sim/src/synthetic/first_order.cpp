#include "echo/synthetic/first_order.h"

#include <algorithm>

namespace echo::synthetic {
namespace {

// The state x = (E, m1, m2) advances as x <- A_k x + B delta_k with
//   E  <- (I + J_k) E + eta (a m1 + (1 - a) m2) + delta_k,
//   mj <- beta_j mj - (1 - beta_j) delta_k.
// apply_a computes A_k X for a 3d x m matrix X.
Eigen::MatrixXd apply_a(const ResidualNetwork& net, std::size_t k, const Eigen::VectorXd& z,
                        const EmaKernel& kn, const Eigen::MatrixXd& x) {
  const Eigen::Index d = static_cast<Eigen::Index>(net.dimension());
  Eigen::MatrixXd out(x.rows(), x.cols());
  const auto e = x.topRows(d);
  const auto m1 = x.middleRows(d, d);
  const auto m2 = x.bottomRows(d);
  out.topRows(d) = e + net.jvp(k, z, e) + kn.eta * (kn.a * m1 + (1.0 - kn.a) * m2);
  out.middleRows(d, d) = kn.beta1 * m1;
  out.bottomRows(d) = kn.beta2 * m2;
  return out;
}

}  // namespace

FirstOrderProfile first_order_profile(const ResidualNetwork& net, const EmaKernel& kernel,
                                      double q, bool measure_c0) {
  const std::vector<Eigen::VectorXd> z = clean_trajectory(net);
  const Eigen::Index d = static_cast<Eigen::Index>(net.dimension());
  const double noise = q * q / static_cast<double>(d);
  Eigen::VectorXd b(3);
  b << 1.0, -(1.0 - kernel.beta1), -(1.0 - kernel.beta2);
  Eigen::MatrixXd p = Eigen::MatrixXd::Zero(3 * d, 3 * d);
  FirstOrderProfile out;
  out.mean_square.push_back(0.0);
  for (const Eigen::VectorXd& s : z) out.sigma.push_back(rms(s));
  for (std::size_t k = 0; k < net.depth(); ++k) {
    const double before = p.topLeftCorner(d, d).trace();
    // A P A^T = A (A P)^T, as P is symmetric.
    const Eigen::MatrixXd ap = apply_a(net, k, z[k], kernel, p);
    p = apply_a(net, k, z[k], kernel, ap.transpose());
    p = 0.5 * (p + p.transpose()).eval();  // keep it symmetric against rounding drift
    const double after = p.topLeftCorner(d, d).trace();
    const double growth = out.sigma[k + 1] * out.sigma[k + 1] / (out.sigma[k] * out.sigma[k]);
    out.epsilon.push_back(before > 0.0 ? std::max(0.0, after / before / growth - 1.0) : 0.0);
    for (Eigen::Index i = 0; i < 3; ++i)
      for (Eigen::Index j = 0; j < 3; ++j)
        p.block(i * d, j * d, d, d).diagonal().array() += noise * b(i) * b(j);
    out.mean_square.push_back(p.topLeftCorner(d, d).trace());
    if (measure_c0) {
      const Eigen::MatrixXd jac = net.jvp(k, z[k], Eigen::MatrixXd::Identity(d, d));
      const double s2 = out.sigma[k] * out.sigma[k];
      const double increment = out.sigma[k + 1] * out.sigma[k + 1] - s2;
      if (increment > 0.0) {
        out.c0 = std::max(out.c0, jac.squaredNorm() / static_cast<double>(d) / (increment / s2));
      }
    }
  }
  return out;
}

double normalized_deviation(const FirstOrderProfile& profile, std::size_t n, double q) {
  const double d_sigma_n2 = profile.sigma[n] * profile.sigma[n];  // d cancels against qbar^2's d
  const double qbar2_d = q * q / (profile.sigma[1] * profile.sigma[1]);
  return profile.mean_square[n] / (d_sigma_n2 * qbar2_d);
}

}  // namespace echo::synthetic
