#include "reference_channel.h"

#include <algorithm>

#include "echo/compensator.h"
#include "echo/ema_kernel.h"
#include "tolerances.h"

namespace echo::proofs {
namespace {

void record(SourceRun* run, std::size_t k, const std::vector<std::vector<float>>& x,
            const std::vector<std::vector<float>>& xp, const std::vector<float>& y) {
  const auto n = static_cast<Eigen::Index>(y.size());
  double scale = 0.0;
  for (std::size_t r = 0; r < x.size(); ++r) {
    double s = 0.0;
    for (float v : xp[r]) s += static_cast<double>(v) * v;
    scale += std::sqrt(s);
  }
  double ys = 0.0;
  for (float v : y) ys += static_cast<double>(v) * v;
  run->rounding_scale.push_back(scale + std::sqrt(ys));
  for (Eigen::Index i = 0; i < n; ++i) {
    double sx = 0.0, sxp = 0.0;
    for (std::size_t r = 0; r < x.size(); ++r) {
      sx += x[r][static_cast<std::size_t>(i)];
      sxp += xp[r][static_cast<std::size_t>(i)];
    }
    const double yi = y[static_cast<std::size_t>(i)];
    run->injected(i, static_cast<Eigen::Index>(k)) = yi - sxp;
    run->correction(i, static_cast<Eigen::Index>(k)) = sxp - sx;
    run->net(i, static_cast<Eigen::Index>(k)) = yi - sx;
  }
}

SourceRun empty_run(std::size_t count, std::size_t sites) {
  SourceRun run;
  const auto n = static_cast<Eigen::Index>(count), s = static_cast<Eigen::Index>(sites);
  run.injected.setZero(n, s);
  run.correction.setZero(n, s);
  run.net.setZero(n, s);
  return run;
}

}  // namespace

Status run_allreduce(const AllReduceSpec& spec, int ranks, std::size_t count, std::size_t sites,
                     const ContributionFn& contributions, SourceRun* run) {
  *run = empty_run(count, sites);
  std::vector<CompensatorState> states(static_cast<std::size_t>(ranks));
  std::vector<std::vector<float>> x(ranks, std::vector<float>(count)), xp = x, y = x;
  std::vector<const float*> in(ranks);
  std::vector<float*> out(ranks), comp(ranks);
  for (int r = 0; r < ranks; ++r) {
    in[r] = x[r].data();
    out[r] = y[r].data();
    comp[r] = xp[r].data();
  }
  AllReduceWorkspace workspace;
  for (std::size_t k = 0; k < sites; ++k) {
    contributions(k, x);
    for (auto& v : x) round_to_dtype(v.data(), v.size(), spec.dtype);
    AllReduceReport report;
    if (Status s = allreduce(spec, ranks, count, in.data(), out.data(), states.data(), comp.data(), &report,
                             &workspace);
        !s.ok()) {
      return s;
    }
    record(run, k, x, xp, y[0]);
  }
  return Status::Ok();
}

SourceRun run_adversary(const CompensatorSpec& spec, int ranks, std::size_t count, std::size_t sites,
                        const ContributionFn& contributions, const AdversaryFn& adversary) {
  SourceRun run = empty_run(count, sites);
  std::vector<CompensatorState> states(static_cast<std::size_t>(ranks));
  std::vector<std::vector<float>> x(ranks, std::vector<float>(count)), xp = x, u = x;
  std::vector<float> y(count);
  const auto n = static_cast<Eigen::Index>(count);
  Eigen::VectorXd partial = Eigen::VectorXd::Zero(n);
  const float ranks_f = static_cast<float>(ranks);
  for (std::size_t k = 0; k < sites; ++k) {
    contributions(k, x);
    Eigen::VectorXd correction = Eigen::VectorXd::Zero(n);
    for (int r = 0; r < ranks; ++r) {
      compensator_apply(spec, states[r], x[r].data(), count, xp[r].data());
      for (std::size_t i = 0; i < count; ++i) {
        correction(static_cast<Eigen::Index>(i)) += static_cast<double>(xp[r][i]) - x[r][i];
      }
    }
    const Eigen::VectorXd delta = adversary(k, partial, correction);
    for (std::size_t i = 0; i < count; ++i) {
      double sum = 0.0;
      for (int r = 0; r < ranks; ++r) sum += xp[r][i];
      y[i] = static_cast<float>(sum + delta(static_cast<Eigen::Index>(i)));
    }
    for (int r = 0; r < ranks; ++r) {
      for (std::size_t i = 0; i < count; ++i) u[r][i] = xp[r][i] - y[i] / ranks_f;
      compensator_update(spec, states[r], u[r].data(), count);
    }
    record(&run, k, x, xp, y);
    partial += run.net.col(static_cast<Eigen::Index>(k));
  }
  return run;
}

double max_partial_sum(const SourceRun& run) {
  Eigen::VectorXd s = Eigen::VectorXd::Zero(run.net.rows());
  double best = 0.0;
  for (Eigen::Index k = 0; k < run.net.cols(); ++k) {
    s += run.net.col(k);
    best = std::max(best, s.norm());
  }
  return best;
}

double tail_representation_ratio(const SourceRun& run, const CompensatorSpec& spec, double* max_residual,
                                 double* allowance) {
  const EmaKernel kernel = EmaKernel::from(spec);
  const Eigen::Index sites = run.net.cols();
  Eigen::VectorXd s = Eigen::VectorXd::Zero(run.net.rows());
  double worst = 0.0, scale = 0.0;
  *max_residual = 0.0;
  *allowance = 0.0;
  for (Eigen::Index t = 0; t < sites; ++t) {
    s += run.net.col(t);
    Eigen::VectorXd tails = Eigen::VectorXd::Zero(run.net.rows());
    for (Eigen::Index j = 0; j <= t; ++j) tails += kernel.phi(static_cast<std::size_t>(t - j)) * run.injected.col(j);
    scale += run.rounding_scale[static_cast<std::size_t>(t)];
    const double residual = (s - tails).norm();
    const double allowed = kRoundingsPerElement * kFp32Unit * scale;
    if (residual / allowed >= worst) {
      worst = residual / allowed;
      *max_residual = residual;
      *allowance = allowed;
    }
  }
  return worst;
}

}  // namespace echo::proofs
