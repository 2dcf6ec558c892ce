// Exact mean-square first-order deviation E||E_k^lin||^2 (Eq. 20, Lemma 4) under isotropic
// injections of covariance q^2/d I, by propagating the covariance of (E, m1, m2) through the
// linearized network and the compensator: no sampling error.
#pragma once

#include <vector>

#include "echo/ema_kernel.h"
#include "echo/synthetic/residual_network.h"

namespace echo::synthetic {

struct FirstOrderProfile {
  std::vector<double> mean_square;  // E||E_k^lin||^2 for k = 0..N (k sites passed)
  std::vector<double> sigma;        // sigma_k of the clean run, k = 0..N
  // Reinforcement of the propagated covariance at every site (Assumption 1, Eq. 24, measured on
  // the covariance this run produces): max(0, tr((I+J)S(I+J)^T)/tr S * sigma_k^2/sigma_{k+1}^2 - 1).
  std::vector<double> epsilon;
  // R2: max_k (||J_k||_F^2 / d) / (Delta_k / sigma_k^2); 0 unless measure_c0.
  double c0 = 0.0;
};

FirstOrderProfile first_order_profile(const ResidualNetwork& net, const EmaKernel& kernel,
                                      double q, bool measure_c0);

// E||E_N^lin||^2 / (d sigma_N^2 qbar^2) with qbar = q / (sqrt(d) sigma_1): the left side of
// Theorem 2 (i) divided by qbar^2.
double normalized_deviation(const FirstOrderProfile& profile, std::size_t n, double q);

}  // namespace echo::synthetic
