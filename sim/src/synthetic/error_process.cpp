#include "echo/synthetic/error_process.h"

namespace echo::synthetic {

ErrorProcess compensate(const EmaKernel& kernel, const Eigen::MatrixXd& injected) {
  const Eigen::Index d = injected.rows();
  const Eigen::Index sites = injected.cols();
  ErrorProcess p;
  p.correction.setZero(d, sites);
  p.net_error.setZero(d, sites);
  p.partial_sum.setZero(d, sites);
  Eigen::VectorXd m1 = Eigen::VectorXd::Zero(d), m2 = Eigen::VectorXd::Zero(d);
  Eigen::VectorXd running = Eigen::VectorXd::Zero(d);
  for (Eigen::Index k = 0; k < sites; ++k) {
    p.correction.col(k) = kernel.eta * (kernel.a * m1 + (1.0 - kernel.a) * m2);
    p.net_error.col(k) = injected.col(k) + p.correction.col(k);
    running += p.net_error.col(k);
    p.partial_sum.col(k) = running;
    m1 = kernel.beta1 * m1 - (1.0 - kernel.beta1) * injected.col(k);
    m2 = kernel.beta2 * m2 - (1.0 - kernel.beta2) * injected.col(k);
  }
  return p;
}

double unrolled_phi(const EmaKernel& kernel, std::size_t m) {
  Eigen::MatrixXd impulse = Eigen::MatrixXd::Zero(1, static_cast<Eigen::Index>(m + 1));
  impulse(0, 0) = 1.0;
  return compensate(kernel, impulse).partial_sum(0, static_cast<Eigen::Index>(m));
}

}  // namespace echo::synthetic
