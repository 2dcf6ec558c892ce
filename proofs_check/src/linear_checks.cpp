// Lemmas 2-4 on linearized synthetic networks: E_{k+1} = (I + J_k) E_k + rho_k with random J_k.
#include <cmath>
#include <string>

#include "echo/ema_kernel.h"
#include "echo/proofs/check.h"
#include "echo/synthetic/error_process.h"
#include "echo/synthetic/first_order.h"
#include "echo/synthetic/random.h"
#include "tolerances.h"

namespace echo::proofs {
namespace {

constexpr Eigen::Index kDim = 12;
constexpr std::size_t kSites = 24;
constexpr double kJacobianScale = 0.4;  // ||J_k|| about 0.8: propagation visibly amplifies
constexpr int kSamples = 6000;
constexpr double kQ = 1.0;
constexpr std::uint64_t kSeed = 4242;

// A linear residual network F_k(z) = J_k z, so the Jacobians are exactly the J_k.
class LinearNetwork final : public synthetic::ResidualNetwork {
 public:
  explicit LinearNetwork(std::vector<Eigen::MatrixXd> j) : j_(std::move(j)) {}
  std::size_t dimension() const override { return static_cast<std::size_t>(j_[0].rows()); }
  std::size_t depth() const override { return j_.size(); }
  Eigen::VectorXd initial_state() const override { return Eigen::VectorXd::Ones(j_[0].rows()); }
  Eigen::VectorXd block(std::size_t k, const Eigen::VectorXd& z) const override { return j_[k] * z; }
  Eigen::MatrixXd jvp(std::size_t k, const Eigen::VectorXd&, const Eigen::MatrixXd& v) const override {
    return j_[k] * v;
  }
 private:
  std::vector<Eigen::MatrixXd> j_;
};

double rel(const Eigen::VectorXd& a, const Eigen::VectorXd& b) { return (a - b).norm() / b.norm(); }

}  // namespace

std::vector<CheckResult> linear_checks() {
  std::vector<CheckResult> out;
  synthetic::Random rng(kSeed);
  std::vector<Eigen::MatrixXd> j;
  for (std::size_t k = 0; k < kSites; ++k) {
    j.push_back(rng.normal_matrix(kDim, kDim, kJacobianScale / std::sqrt(static_cast<double>(kDim))));
  }
  const Eigen::MatrixXd id = Eigen::MatrixXd::Identity(kDim, kDim);
  // Phi[n] = Phi_{N,n} = (I + J_{N-1}) ... (I + J_n), Phi[N] = I.
  std::vector<Eigen::MatrixXd> phi(kSites + 1, id);
  for (std::size_t n = kSites; n-- > 0;) phi[n] = phi[n + 1] * (id + j[n]);
  EmaKernel kernel = EmaKernel::from(CompensatorSpec{});
  kernel.eta = 1.0;

  Eigen::MatrixXd delta(kDim, static_cast<Eigen::Index>(kSites));
  for (Eigen::Index s = 0; s < delta.cols(); ++s) delta.col(s) = rng.on_sphere(kDim, kQ);
  const synthetic::ErrorProcess p = synthetic::compensate(kernel, delta);
  // E_N^lin by the recursion.
  Eigen::VectorXd e = Eigen::VectorXd::Zero(kDim);
  for (std::size_t k = 0; k < kSites; ++k) e = (id + j[k]) * e + p.net_error.col(static_cast<Eigen::Index>(k));
  // Lemma 2: S_{N-1} + sum_{t<=N-2} Phi_{N,t+2} J_{t+1} S_t.
  Eigen::VectorXd lemma2 = p.partial_sum.col(static_cast<Eigen::Index>(kSites - 1));
  for (std::size_t t = 0; t + 2 <= kSites; ++t) lemma2 += phi[t + 2] * j[t + 1] * p.partial_sum.col(static_cast<Eigen::Index>(t));
  out.push_back(at_most("lemma2.partial_sum_form", "E_N = S_{N-1} + sum_t Phi_{N,t+2} J_{t+1} S_t", rel(lemma2, e),
                        kFloat64IdentityRelTol, "relative difference, d=12, N=24, eta=1"));
  // Lemma 3: K_s = T_{N-1-s} I + sum_{t=s}^{N-2} T_{t-s} Phi_{N,t+2} J_{t+1}.
  std::vector<Eigen::MatrixXd> kmat;
  double frob = 0.0;
  Eigen::VectorXd lemma3 = Eigen::VectorXd::Zero(kDim);
  for (std::size_t s = 0; s < kSites; ++s) {
    Eigen::MatrixXd ks = kernel.tail(kSites - 1 - s) * id;
    for (std::size_t t = s; t + 2 <= kSites; ++t) ks += kernel.tail(t - s) * phi[t + 2] * j[t + 1];
    lemma3 += ks * delta.col(static_cast<Eigen::Index>(s));
    frob += ks.squaredNorm();
    kmat.push_back(ks);
  }
  out.push_back(at_most("lemma3.coefficients", "E_N = sum_s K_s delta_s", rel(lemma3, e), kFloat64IdentityRelTol));
  // Lemma 4 exact: covariance propagation gives E||E_N||^2 = (q^2/d) sum ||K_s||_F^2 for
  // covariance q^2/d I.
  const double bound = kQ * kQ / static_cast<double>(kDim) * frob;
  const LinearNetwork net(j);
  const synthetic::FirstOrderProfile prof = synthetic::first_order_profile(net, kernel, kQ, false);
  out.push_back(within("lemma4.covariance", "E||E_N||^2 = (q^2/d) sum_s ||K_s||_F^2 (cov q^2/d I)",
                       prof.mean_square.back() / bound, 1.0, kFloat64IdentityRelTol, "ratio, exact propagation"));
  // Lemma 4 by sampling: isotropic errors with a random radius in [0, q] (covariance below
  // q^2/d I): the lower confidence bound must not exceed the bound; with radius q it is equal.
  double sum = 0.0, sum_sq = 0.0, sum_eq = 0.0, sum_eq_sq = 0.0;
  for (int m = 0; m < kSamples; ++m) {
    Eigen::VectorXd x = Eigen::VectorXd::Zero(kDim), xe = Eigen::VectorXd::Zero(kDim);
    for (std::size_t s = 0; s < kSites; ++s) {
      const Eigen::VectorXd d = rng.on_sphere(kDim, kQ);
      xe += kmat[s] * d;
      x += kmat[s] * (d * rng.uniform());
    }
    sum += x.squaredNorm();
    sum_sq += x.squaredNorm() * x.squaredNorm();
    sum_eq += xe.squaredNorm();
    sum_eq_sq += xe.squaredNorm() * xe.squaredNorm();
  }
  const double mean = sum / kSamples, se = std::sqrt((sum_sq / kSamples - mean * mean) / kSamples);
  const double mean_eq = sum_eq / kSamples, se_eq = std::sqrt((sum_eq_sq / kSamples - mean_eq * mean_eq) / kSamples);
  out.push_back(at_most("lemma4.mc.dominated", "E||E_N||^2 <= (q^2/d) sum ||K_s||_F^2 (LCB/bound)",
                        (mean - kConfidenceZ * se) / bound, 1.0, "radius ~ q U[0,1], M=6000, z=4"));
  out.push_back(within("lemma4.mc.equality", "E||E_N||^2 / ((q^2/d) sum ||K_s||_F^2) at ||delta|| = q", mean_eq / bound,
                       1.0, kConfidenceZ * se_eq / bound, "tolerance z * stderr, M=6000"));
  return out;
}

}  // namespace echo::proofs
