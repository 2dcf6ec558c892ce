// Proposition 3: the backward source bound in mean square under smooth normalization Jacobians.
// S^bwd_t = sum_{s>=t} B_{s,t} delta_s, B_{s,t} = A_s - sum_{k=t}^{s-1} w_{s-1-k} A_k, A_k = D_k/sigma_k,
// and under the noise model E||S^bwd_t||^2 = (q^2/d) sum_{s>=t} ||B_{s,t}||_F^2 exactly.
#include <cmath>
#include <string>

#include "echo/ema_kernel.h"
#include "echo/proofs/check.h"
#include "echo/proofs/report.h"
#include "echo/synthetic/random.h"

namespace echo::proofs {
namespace {

constexpr Eigen::Index kDim = 16;
constexpr double kSigma0 = 1.0, kDelta = 1.0;  // sigma_k^2 = sigma_0^2 + k Delta (R1)
constexpr double kGammaBar = 1.0, kWobble = 0.3, kOmega = 0.5;  // D_k = gbar (1 + 0.3 sin(theta + w sigma_k))
// Flatness: from N = 64 to 512, max_t E||S_t||^2 sigma_1^2/q^2 may grow by at most 10 %.
constexpr double kFlatMaxGrowth = 1.10;

double sigma(std::size_t k) { return std::sqrt(kSigma0 * kSigma0 + static_cast<double>(k) * kDelta); }

// max_t E||S^bwd_t||^2 sigma_1^2 / q^2 for depth n (compensated at eta = 1, or off).
double backward_source(std::size_t n, const EmaKernel& kernel, bool compensated, const Eigen::VectorXd& theta) {
  std::vector<Eigen::ArrayXd> a(n);
  for (std::size_t k = 0; k < n; ++k) {
    a[k] = kGammaBar * (1.0 + kWobble * (theta.array() + kOmega * sigma(k)).sin()) / sigma(k);
  }
  std::vector<double> total(n, 0.0);
  for (std::size_t s = 0; s < n; ++s) {
    Eigen::ArrayXd b = a[s];
    for (std::size_t t = s + 1; t-- > 0;) {
      if (t < s && compensated) b -= kernel.weight(s - 1 - t) * a[t];
      total[t] += b.square().sum() / static_cast<double>(kDim);
    }
  }
  double worst = 0.0;
  for (double v : total) worst = std::max(worst, v);
  return worst * sigma(1) * sigma(1);
}

}  // namespace

std::vector<CheckResult> backward_checks() {
  std::vector<CheckResult> out;
  synthetic::Random rng(31337);
  Eigen::VectorXd theta(kDim);
  for (Eigen::Index i = 0; i < kDim; ++i) theta(i) = 2.0 * M_PI * rng.uniform();
  EmaKernel k = EmaKernel::from(CompensatorSpec{});
  k.eta = 1.0;
  // Constants of the proof: ||D_k|| <= gmax, ||D_s - D_k|| <= c_D (s-k) Dmax / sigma_s with
  // c_D = gbar * wobble * omega (|sin' | <= 1 and sigma_s - sigma_k <= (s-k) Dmax / sigma_s).
  const double gmax = kGammaBar * (1.0 + kWobble);
  const double c_d = kGammaBar * kWobble * kOmega;
  const double c_a = c_d * kDelta + gmax * kDelta / kSigma0;
  const double s1 = sigma(1);
  const double c_delta = s1 * s1 / (kSigma0 * kSigma0) * k.tau_2();
  const double c_delta2 = std::pow(s1, 4) / std::pow(kSigma0, 4) + std::pow(s1, 4) / (kDelta * kSigma0 * kSigma0);
  // E||S||^2 <= (2 q^2 / sigma_1^2) [gmax^2 c_Delta + C_A^2 (1+mu_w)^2 c'_Delta / sigma_1^2].
  const double bound = 2.0 * (gmax * gmax * c_delta + c_a * c_a * (1.0 + k.mu_w()) * (1.0 + k.mu_w()) * c_delta2 / (s1 * s1));
  std::vector<double> comp, off, ns;
  for (std::size_t n = 8; n <= 512; n *= 2) {
    ns.push_back(static_cast<double>(n));
    comp.push_back(backward_source(n, k, true, theta));
    off.push_back(backward_source(n, k, false, theta));
  }
  series_registry()["prop3_compensated"] = comp;
  series_registry()["prop3_uncompensated"] = off;
  double worst = 0.0;
  for (double v : comp) worst = std::max(worst, v);
  out.push_back(at_most("prop3.bound", "max_t E||S^bwd_t||^2 sigma_1^2/q^2 <= C_bwd", worst, bound,
                        "max over N = 8..512, C_bwd from the proof's constants"));
  double growth = 0.0;
  for (std::size_t i = 3; i < comp.size(); ++i) growth = std::max(growth, comp[i] / comp[3]);
  out.push_back(at_most("prop3.flat", "max_{N in 64..512} of it / value at N = 64", growth, kFlatMaxGrowth));
  out.push_back(info("prop3.uncompensated", "off: same quantity at N = 512 / at N = 64 (grows as log N)",
                     off.back() / off[3]));
  return out;
}

}  // namespace echo::proofs
