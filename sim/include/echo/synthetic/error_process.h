// The compensated error process in exact (float64) arithmetic: given the injected errors
// delta_k, the corrections C_k, net errors rho_k and partial sums S_t of Eqs. (5), (6), (12).
#pragma once

#include <Eigen/Dense>

#include "echo/ema_kernel.h"

namespace echo::synthetic {

struct ErrorProcess {
  Eigen::MatrixXd correction;   // C_k, one column per site
  Eigen::MatrixXd net_error;    // rho_k = delta_k + C_k
  Eigen::MatrixXd partial_sum;  // S_t = sum_{k <= t} rho_k
};

// Runs the summed averages m_j <- beta_j m_j - (1 - beta_j) delta_k (the ranks' residuals add up
// to -delta_k) and C_k = eta (a m1 + (1 - a) m2). injected: d x N, one column per site.
ErrorProcess compensate(const EmaKernel& kernel, const Eigen::MatrixXd& injected);

// phi_m read off the recursion: the partial sum m sites after a unit error, with no other error.
double unrolled_phi(const EmaKernel& kernel, std::size_t m);

}  // namespace echo::synthetic
