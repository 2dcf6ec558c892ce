// Drives the reference compensator (compensator_apply / compensator_update, per rank, fp32) and
// records the error process in float64: delta_k, C_k, rho_k, and the rounding scale the
// tolerances of the identities need.
#pragma once

#include <functional>
#include <vector>

#include <Eigen/Dense>

#include "echo/allreduce.h"
#include "echo/status.h"

namespace echo::proofs {

struct SourceRun {
  Eigen::MatrixXd injected;    // delta_k = y - sum_i x'_i, one column per site
  Eigen::MatrixXd correction;  // C_k = sum_i (x'_i - x_i)
  Eigen::MatrixXd net;         // rho_k = y - sum_i x_i
  std::vector<double> rounding_scale;  // sum_i ||x'_ki|| + ||y_k|| (sum over ranks of ||y/P||)
};

// Contributions of site k, rank-major: out[r][i].
using ContributionFn = std::function<void(std::size_t site, std::vector<std::vector<float>>& out)>;
// The adversary sees the partial sum so far and this site's correction, and returns delta_k.
using AdversaryFn = std::function<Eigen::VectorXd(std::size_t site, const Eigen::VectorXd& partial_sum,
                                                  const Eigen::VectorXd& correction)>;

// The real quantized all-reduce (echo::allreduce with per-rank states).
Status run_allreduce(const AllReduceSpec& spec, int ranks, std::size_t count, std::size_t sites,
                     const ContributionFn& contributions, SourceRun* run);

// An all-reduce whose error an adversary picks: y = fp32(sum_i x'_i + delta); global residual
// u_i = fp32(x'_i - fp32(y / P)) and the reference update, as in docs/numerics.md s. 6.
SourceRun run_adversary(const CompensatorSpec& spec, int ranks, std::size_t count, std::size_t sites,
                        const ContributionFn& contributions, const AdversaryFn& adversary);

// max_t ||S_t|| of a run.
double max_partial_sum(const SourceRun& run);
// max_t ||S_t - sum_{s<=t} phi_{t-s} delta_s|| / (its rounding allowance): <= 1 when the tail
// representation (Lemma 1 / Eq. 13) holds up to fp32 rounding. Also returns the largest ||S_t||.
double tail_representation_ratio(const SourceRun& run, const CompensatorSpec& spec, double* max_residual,
                                 double* allowance);

}  // namespace echo::proofs
