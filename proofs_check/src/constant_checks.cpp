// The constants of the paper at the default coefficients, and the closed form of the tails.
#include <algorithm>
#include <cmath>
#include <string>

#include "echo/ema_kernel.h"
#include "echo/proofs/check.h"
#include "echo/proofs/report.h"
#include "echo/synthetic/error_process.h"
#include "tolerances.h"

namespace echo::proofs {
namespace {
constexpr std::size_t kSitesSmolPaper = 56;  // N of Sec. 3.2 (28 layers, 2 sites each)
constexpr std::size_t kTailHorizon = 64;     // T_m compared for m < 64 (T_63 ~ 0.7^63 ~ 2e-10)
}  // namespace

std::vector<CheckResult> constant_checks() {
  std::vector<CheckResult> out;
  const CompensatorSpec defaults;  // eta 0.75, a 0.35, beta1 0.7, beta2 0.3
  EmaKernel k = EmaKernel::from(defaults);
  EmaKernel k1 = k;
  k1.eta = 1.0;
  const std::string dflt = "a=0.35, beta1=0.7, beta2=0.3";
  out.push_back(within("const.one_plus_mu_w", "1 + mu_w = 1 + sum_r r w_r = 2.095", 1.0 + k.mu_w(), 2.095,
                       kHalfUnitThreeDecimals, dflt));
  out.push_back(within("const.tau_2", "tau_2 = sum_m T_m^2 = 1.280", k.tau_2(), 1.280,
                       kHalfUnitThreeDecimals, dflt));
  out.push_back(within("const.gain_N56", "N/(1 + mu_w) = 26.7 at N = 56",
                       static_cast<double>(kSitesSmolPaper) / (1.0 + k.mu_w()), 26.7, kHalfUnitOneDecimal,
                       "reduction of the source bound from Nq"));
  out.push_back(within("const.phi_square_sum", "sum_{m<N} phi_m^2 = 5.0 at eta = 0.75, N = 56",
                       k.phi_square_sum(kSitesSmolPaper - 1), 5.0, kHalfUnitOneDecimal,
                       "E||S_t||^2 <= 5.0 q^2 vs 56 q^2 uncompensated"));
  // sum_r w_r = 1 and sum_m T_m = 1 + mu_w, from the series (truncated where the terms are < 1e-17).
  double wsum = 0.0, tsum = 0.0;
  for (std::size_t r = 0; r < 200; ++r) {
    wsum += k.weight(r);
    tsum += k.tail(r);
  }
  out.push_back(within("const.kernel_mass", "sum_r w_r = 1", wsum, 1.0, kFloat64IdentityRelTol));
  out.push_back(within("const.tail_mass", "sum_m T_m = 1 + mu_w (Thm 1 proof)", tsum, 1.0 + k.mu_w(),
                       kFloat64IdentityRelTol * (1.0 + k.mu_w())));
  // Closed form T_m = a beta1^m + (1 - a) beta2^m against the unrolled EMA recursion (eta = 1),
  // and phi_m = (1 - eta) + eta T_m at eta = 0.75.
  double worst_t = 0.0, worst_phi = 0.0;
  std::vector<double> tails;
  for (std::size_t m = 0; m < kTailHorizon; ++m) {
    worst_t = std::max(worst_t, std::fabs(synthetic::unrolled_phi(k1, m) - k1.tail(m)));
    worst_phi = std::max(worst_phi, std::fabs(synthetic::unrolled_phi(k, m) - k.phi(m)));
    tails.push_back(k1.tail(m));
  }
  series_registry()["tail_T_m"] = tails;
  out.push_back(at_most("const.tail_closed_form", "max_m |T_m - unrolled EMA impulse response|", worst_t,
                        kFloat64IdentityRelTol, "m < 64, T_0 = 1"));
  out.push_back(at_most("const.phi_closed_form", "max_m |phi_m - unrolled (eta=0.75)|", worst_phi,
                        kFloat64IdentityRelTol, "phi_m = 1 - eta + eta T_m"));
  return out;
}

}  // namespace echo::proofs
