// The compensator's error kernel and the constants of the paper's bounds (Secs. 5.2, 6;
// ECHO.md section 4), in float64.
#pragma once

#include <cstddef>

#include "echo/compensator.h"

namespace echo {

struct EmaKernel {
  double eta = 0.0;  // gain; 0 when the compensator is off
  double a = 1.0;    // weight of the first average
  double beta1 = 0.0;
  double beta2 = 0.0;

  // Dual: (eta, a, beta1, beta2); single: a = 1, beta1 = beta; off: eta = 0.
  static EmaKernel from(const CompensatorSpec& spec);

  // w_r = a (1 - beta1) beta1^r + (1 - a)(1 - beta2) beta2^r, the weight of an error of age r.
  double weight(std::size_t r) const;
  // T_m = sum_{r >= m} w_r = a beta1^m + (1 - a) beta2^m.
  double tail(std::size_t m) const;
  // phi_m = (1 - eta) + eta T_m, the share of an error left in the partial sum after m sites.
  double phi(std::size_t m) const;
  // mu_w = sum_r r w_r.
  double mu_w() const;
  // tau_2 = sum_{m >= 0} T_m^2.
  double tau_2() const;
  // Eq. 21: max_t ||S_t|| <= (1 - eta) N q + eta (1 + mu_w) q.
  double partial_sum_bound(std::size_t sites, double q) const;
  // sum_{m <= t} phi_m^2 (Remark 1 at gain eta).
  double phi_square_sum(std::size_t t) const;
};

}  // namespace echo
