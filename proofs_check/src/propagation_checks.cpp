// Theorem 2, Remark 2, Corollary 1 on a pre-norm MLP network, and Proposition 2 (a), (b).
#include <cmath>
#include <cstdint>
#include <string>

#include "echo/ema_kernel.h"
#include "echo/proofs/check.h"
#include "echo/proofs/report.h"
#include "echo/synthetic/constructions.h"
#include "echo/synthetic/first_order.h"
#include "echo/synthetic/prenorm_network.h"
#include "echo/synthetic/random.h"
#include "tolerances.h"

namespace echo::proofs {
namespace {

constexpr std::size_t kMaxDepth = 512;
constexpr std::size_t kMinDepth = 8;
constexpr std::size_t kWidth = 32;
// The Assumption-1 network: every block adds s^2 = 1 to sigma^2, starting from sigma_0 = 1.
constexpr double kRotationScale = 1.0;
constexpr std::uint64_t kRotationSeed = 1;
// Flatness of Theorem 2: from N = 64 to 512 the normalized deviation may change by at most 10 %
// (its bound changes only through tau_2 sigma_1^2 / sigma_N^2, which decays). Remark 2's
// uncompensated curve grows by a constant amount per doubling of N (log N).
constexpr std::size_t kFlatFrom = 64;
// The rotation network meets Eq. 24 up to <v, J_k v> ~ (s / sigma_k) / d per site, whose sum over
// 512 sites is about 2 sqrt(512) / 32 ~ 1.4 at worst and ~0.01 for the covariances that arise;
// Lambda <= 1 keeps e^Lambda, the factor of Theorem 2's constant, below e.
constexpr double kLambdaMax = 1.0;
constexpr double kFlatMaxGrowth = 1.10;
// log N growth: the increments over successive doublings agree within a factor 2 (a power law
// N^a would multiply them by 2^a per doubling, i.e. by 2^(5a) from the first to the last).
constexpr double kLogIncrementRatio = 2.0;
// Remark 2 on the rotation network (sigma_1^2 / Delta = 2): R_off rises by about 2 ln 8 ~ 4.2
// from N = 64 to 512 on R_off(64) ~ 7.4, a ratio near 1.56; requiring >= 1.2 (twice the drift
// the compensated curve is allowed) separates growth from flatness with margin on both sides.
constexpr double kLogGrowthMin = 1.2;
// Prop. 2(a): log R(N) ~ 4 c sqrt(N / Delta) - (1 + c^2) log N; the fitted slope of log R in
// sqrt(N) over 64..512 must be within 25 % of 4 c / sqrt(Delta) (the log term moves it by ~7 %).
constexpr double kAmplifySlopeBand = 0.25;
// Prop. 2(b): remainder energy ~ qbar^4 N: the fitted exponent of N over 256..2048 lies in
// 1 +- 0.3 (g_k decreases toward g_inf > 0, which lifts the early points: the local exponent
// rises from 0.5 at N = 16 toward 1 and is above 0.8 from N = 256 on).
constexpr double kSecondOrderExponentBand = 0.3;

std::vector<std::size_t> depths() {
  std::vector<std::size_t> d;
  for (std::size_t n = kMinDepth; n <= kMaxDepth; n *= 2) d.push_back(n);
  return d;
}

double least_squares_slope(const std::vector<double>& x, const std::vector<double>& y) {
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < x.size(); ++i) { mx += x[i]; my += y[i]; }
  mx /= x.size(); my /= y.size();
  double sxy = 0, sxx = 0;
  for (std::size_t i = 0; i < x.size(); ++i) { sxy += (x[i] - mx) * (y[i] - my); sxx += (x[i] - mx) * (x[i] - mx); }
  return sxy / sxx;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// A random GELU pre-norm MLP: typical random blocks amplify some deviations transiently, so its
// measured budget Lambda is several units; reported for comparison, not held to Theorem 2.
void random_mlp(std::vector<CheckResult>* out) {
  synthetic::PreNormConfig cfg;
  cfg.depth = kMaxDepth;
  cfg.width = kWidth;
  cfg.tokens = 1;
  cfg.ranks = 1;
  cfg.attention = false;
  cfg.seed = 11;
  const synthetic::PreNormNetwork net(cfg);
  EmaKernel comp = EmaKernel::from(CompensatorSpec{});
  comp.eta = 1.0;
  EmaKernel off = comp;
  off.eta = 0.0;
  const auto pc = synthetic::first_order_profile(net, comp, 1.0, false);
  const auto po = synthetic::first_order_profile(net, off, 1.0, false);
  double lambda = 0.0;
  for (double e : po.epsilon) lambda += e;
  std::vector<double> rc, ro;
  for (std::size_t n : depths()) {
    rc.push_back(synthetic::normalized_deviation(pc, n, 1.0));
    ro.push_back(synthetic::normalized_deviation(po, n, 1.0));
  }
  series_registry()["random_mlp_compensated"] = rc;
  series_registry()["random_mlp_uncompensated"] = ro;
  out->push_back(info("thm2.random_mlp", "random GELU MLP: R(512) with / without compensation", rc.back() / ro.back(),
                      "R=" + fmt("%.3g", rc.back()) + " vs " + fmt("%.3g", ro.back()) + ", Lambda(512)=" +
                          fmt("%.3g", lambda) + " (Assumption 1 only loosely met)"));
}

void theorem2(std::vector<CheckResult>* out) {
  const synthetic::RotationNetwork net(kWidth, kMaxDepth, kRotationScale, kRotationSeed);
  const double q = 1.0;  // the first-order deviation is linear in q; R is normalized by qbar^2
  EmaKernel comp = EmaKernel::from(CompensatorSpec{});
  comp.eta = 1.0;
  EmaKernel off = comp;
  off.eta = 0.0;
  const EmaKernel gain = EmaKernel::from(CompensatorSpec{});
  const auto pc = synthetic::first_order_profile(net, comp, q, true);
  const auto po = synthetic::first_order_profile(net, off, q, false);
  const auto pg = synthetic::first_order_profile(net, gain, q, false);
  std::vector<double> ns, rc, ro, rg, bound;
  double worst_ratio = 0.0, lambda = 0.0;
  std::size_t k_done = 0;
  for (std::size_t n : depths()) {
    for (; k_done < n; ++k_done) lambda += po.epsilon[k_done];
    const double s1 = pc.sigma[1], sn = pc.sigma[n];
    const double b = 2.0 * (comp.tau_2() * s1 * s1 / (sn * sn) +
                            (1.0 + comp.mu_w()) * (1.0 + comp.mu_w()) * pc.c0 * std::exp(lambda));
    ns.push_back(static_cast<double>(n));
    rc.push_back(synthetic::normalized_deviation(pc, n, q));
    ro.push_back(synthetic::normalized_deviation(po, n, q));
    rg.push_back(synthetic::normalized_deviation(pg, n, q));
    bound.push_back(b);
    worst_ratio = std::max(worst_ratio, rc.back() / b);
  }
  auto& series = series_registry();
  series["depth_N"] = ns;
  series["thm2_compensated"] = rc;
  series["thm2_uncompensated"] = ro;
  series["thm2_eta0.75"] = rg;
  series["thm2_bound"] = bound;
  out->push_back(at_most("thm2.assumption1", "Lambda = sum_k eps_k (measured, N = 512)", lambda, kLambdaMax,
                         "rotation pre-norm network, d=32"));
  out->push_back(at_most("thm2.bound", "E||E_N||^2/(d sigma_N^2) <= 2[tau2 s1^2/sN^2 + (1+mu_w)^2 C0 e^L] qbar^2",
                         worst_ratio, 1.0,
                         "max over N=8..512 of measured/bound; C0=" + fmt("%.3g", pc.c0) + ", Lambda(512)=" +
                             fmt("%.3g", lambda) + " measured on the network"));
  const std::size_t i64 = 3;  // depths(): 8, 16, 32, 64, ...
  double worst_growth = 0.0;
  for (std::size_t i = i64; i < rc.size(); ++i) worst_growth = std::max(worst_growth, rc[i] / rc[i64]);
  out->push_back(at_most("thm2.flat", "max_{N in 64..512} R(N) / R(64), eta = 1", worst_growth, kFlatMaxGrowth,
                         "R = E||E_N^lin||^2/(d sigma_N^2 qbar^2): R(8)=" + fmt("%.3g", rc[0]) + ", R(512)=" +
                             fmt("%.3g", rc.back())));
  // Remark 2: uncompensated growth like log N.
  std::vector<double> inc;
  for (std::size_t i = 1; i < ro.size(); ++i) inc.push_back(ro[i] - ro[i - 1]);
  double lo = inc[0], hi = inc[0];
  for (double v : inc) { lo = std::min(lo, v); hi = std::max(hi, v); }
  out->push_back(at_least("remark2.grows", "off: R(512) / R(64) (grows with N)", ro.back() / ro[i64], kLogGrowthMin,
                          "R_off(8)=" + fmt("%.3g", ro[0]) + ", R_off(512)=" + fmt("%.3g", ro.back())));
  out->push_back(at_most("remark2.log_rate", "off: max/min increment of R per doubling of N", lo > 0 ? hi / lo : INFINITY,
                         kLogIncrementRatio, "constant increments = growth like log N"));
  double s1 = pc.sigma[1];
  double dmin = INFINITY;
  for (std::size_t k = 0; k < kMaxDepth; ++k) dmin = std::min(dmin, pc.sigma[k + 1] * pc.sigma[k + 1] - pc.sigma[k] * pc.sigma[k]);
  const double r2 = std::exp(lambda) * (1.0 + s1 * s1 / dmin * std::log(1.0 + (kMaxDepth - 1) * dmin / (s1 * s1)));
  out->push_back(at_most("remark2.bound", "off: R(N) <= e^L [1 + s1^2/Dmin log(1 + (N-1) Dmin/s1^2)]", ro.back(), r2,
                         "N = 512"));
  out->push_back(info("cor1.eta0.75", "R(512) at eta = 0.75 (Corollary 1: between eta=1 and off)", rg.back(),
                      "R(64)=" + fmt("%.3g", rg[i64])));
}

void proposition2a(std::vector<CheckResult>* out) {
  synthetic::RayPath path;
  path.dimension = 16;
  path.depth = kMaxDepth;
  const double c = 1.0;
  const synthetic::AmplifyingNetwork net(path, c);
  EmaKernel comp = EmaKernel::from(CompensatorSpec{});
  comp.eta = 1.0;
  const auto pc = synthetic::first_order_profile(net, comp, 1.0, false);
  std::vector<double> x, y, all;
  for (std::size_t n : depths()) {
    const double r = synthetic::normalized_deviation(pc, n, 1.0);
    all.push_back(r);
    if (n >= 64) {
      x.push_back(std::sqrt(static_cast<double>(n)));
      y.push_back(std::log(r));
    }
  }
  series_registry()["prop2a_amplifying"] = all;
  const double predicted = 4.0 * c / std::sqrt(path.delta);
  out->push_back(within("prop2a.exp_sqrtN", "amplifying net: d log R / d sqrt(N) = 4c/sqrt(Delta)",
                        least_squares_slope(x, y) / predicted, 1.0, kAmplifySlopeBand,
                        "ratio fitted/predicted, eta=1, c=1, R(512)=" + fmt("%.3g", all.back())));
}

void proposition2b(std::vector<CheckResult>* out) {
  synthetic::RayPath path;
  path.dimension = 16;
  path.depth = 2048;
  const double h = 1.0;
  const synthetic::SecondOrderNetwork net(path, h);
  EmaKernel comp = EmaKernel::from(CompensatorSpec{});
  comp.eta = 1.0;
  const double d = static_cast<double>(path.dimension);
  // qbar = 1e-3: the deviation stays far inside its linear bound (no truncation), and the
  // remainder (~1e-6 relative) is far above float64 cancellation (~1e-16 / 1e-6).
  const double qbar = 1e-3;
  const double q = qbar * std::sqrt(d) * path.sigma(1);
  const std::vector<Eigen::VectorXd> z = synthetic::clean_trajectory(net);
  synthetic::Random rng(909);
  constexpr int kDraws = 16;
  std::vector<double> energy(path.depth + 1, 0.0);
  for (int m = 0; m < kDraws; ++m) {
    const Eigen::VectorXd delta0 = rng.on_sphere(static_cast<Eigen::Index>(d), q);
    Eigen::VectorXd zq = z[0], elin = Eigen::VectorXd::Zero(z[0].size());
    for (std::size_t k = 0; k < path.depth; ++k) {
      // A single injection at site 0; at eta = 1 the compensator returns -w_{k-1} delta_0 later.
      const Eigen::VectorXd rho = k == 0 ? delta0 : Eigen::VectorXd(-comp.weight(k - 1) * delta0);
      elin = elin + net.jvp(k, z[k], elin) + rho;
      zq = zq + net.block(k, zq) + rho;
      energy[k + 1] += ((zq - z[k + 1]) - elin).squaredNorm() / kDraws;
    }
  }
  std::vector<double> x, y, curve;
  for (std::size_t n = 256; n <= path.depth; n *= 2) {
    const double sn = path.sigma(n);
    const double normalized = energy[n] / (d * sn * sn) / std::pow(qbar, 4);
    curve.push_back(normalized);
    x.push_back(std::log(static_cast<double>(n)));
    y.push_back(std::log(normalized));
  }
  series_registry()["prop2b_remainder"] = curve;
  out->push_back(within("prop2b.order_N", "2nd-order example: E||E_N - E_N^lin||^2/(d sN^2) ~ qbar^4 N",
                        least_squares_slope(x, y), 1.0, kSecondOrderExponentBand,
                        "fitted exponent of N over 256..2048, qbar=1e-3, " + std::to_string(kDraws) + " draws"));
}

}  // namespace

std::vector<CheckResult> propagation_checks() {
  std::vector<CheckResult> out;
  theorem2(&out);
  random_mlp(&out);
  proposition2a(&out);
  proposition2b(&out);
  return out;
}

}  // namespace echo::proofs
