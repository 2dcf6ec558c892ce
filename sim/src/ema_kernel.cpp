#include "echo/ema_kernel.h"

#include <cmath>

namespace echo {

EmaKernel EmaKernel::from(const CompensatorSpec& spec) {
  EmaKernel k;
  switch (spec.mode) {
    case CompensatorMode::kOff:
      k.eta = 0.0;
      break;
    case CompensatorMode::kSingle:
      k.eta = spec.eta;
      k.a = 1.0;
      k.beta1 = spec.beta;
      break;
    case CompensatorMode::kDeficit:
      // Without a post-norm the deficit loop's correction is the single average at gain 1 and
      // beta = 1 - eta (docs/numerics.md 6.2), in exact arithmetic.
      k.eta = 1.0;
      k.a = 1.0;
      k.beta1 = 1.0 - static_cast<double>(spec.eta);
      break;
    case CompensatorMode::kDual:
      k.eta = spec.eta;
      k.a = spec.a;
      k.beta1 = spec.beta1;
      k.beta2 = spec.beta2;
      break;
  }
  return k;
}

double EmaKernel::weight(std::size_t r) const {
  const double rd = static_cast<double>(r);
  return a * (1.0 - beta1) * std::pow(beta1, rd) + (1.0 - a) * (1.0 - beta2) * std::pow(beta2, rd);
}

double EmaKernel::tail(std::size_t m) const {
  const double md = static_cast<double>(m);
  return a * std::pow(beta1, md) + (1.0 - a) * std::pow(beta2, md);
}

double EmaKernel::phi(std::size_t m) const { return (1.0 - eta) + eta * tail(m); }

double EmaKernel::mu_w() const {
  // sum_r r (1 - b) b^r = b / (1 - b).
  return a * beta1 / (1.0 - beta1) + (1.0 - a) * beta2 / (1.0 - beta2);
}

double EmaKernel::tau_2() const {
  // sum_m (a b1^m + (1-a) b2^m)^2, three geometric series.
  return a * a / (1.0 - beta1 * beta1) + 2.0 * a * (1.0 - a) / (1.0 - beta1 * beta2) +
         (1.0 - a) * (1.0 - a) / (1.0 - beta2 * beta2);
}

double EmaKernel::partial_sum_bound(std::size_t sites, double q) const {
  return (1.0 - eta) * static_cast<double>(sites) * q + eta * (1.0 + mu_w()) * q;
}

double EmaKernel::phi_square_sum(std::size_t t) const {
  double sum = 0.0;
  for (std::size_t m = 0; m <= t; ++m) sum += phi(m) * phi(m);
  return sum;
}

}  // namespace echo
