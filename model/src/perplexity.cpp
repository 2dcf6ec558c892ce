#include "echo/model/perplexity.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace echo::model {

Status plan_windows(std::size_t num_tokens, int num_windows, int length,
                    std::vector<std::size_t>* starts) {
  if (num_windows < 1 || length < 2) {
    return Status(StatusCode::kInvalidArgument, "need at least one window of at least 2 tokens");
  }
  const auto windows = static_cast<std::size_t>(num_windows);
  const auto span = static_cast<std::size_t>(length);
  if (windows > num_tokens / span) {
    return Status(StatusCode::kInvalidArgument,
                  std::to_string(num_windows) + " windows of " + std::to_string(length) +
                      " tokens do not fit in " + std::to_string(num_tokens) + " tokens");
  }
  starts->clear();
  const std::size_t slack = num_tokens - windows * span;
  for (std::size_t w = 0; w < windows; ++w) {
    // Gaps of slack / (windows - 1) tokens between windows, in integer arithmetic.
    const std::size_t gap = windows > 1 ? slack * w / (windows - 1) : 0;
    starts->push_back(w * span + gap);
  }
  return Status::Ok();
}

double window_nll(const Matrix& logits, const std::vector<std::int32_t>& tokens) {
  double total = 0.0;
  for (Eigen::Index t = 0; t + 1 < logits.rows(); ++t) {
    const auto row = logits.row(t);
    const double peak = row.maxCoeff();
    double sum = 0.0;
    for (Eigen::Index v = 0; v < row.size(); ++v) sum += std::exp(row(v) - peak);
    const std::int32_t next = tokens[static_cast<std::size_t>(t + 1)];
    total += peak + std::log(sum) - row(next);
  }
  return total;
}

double student_t_975(std::size_t df) {
  static const double kTable[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                  2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                                  2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                                  2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  if (df == 0) return INFINITY;
  if (df <= 30) return kTable[df - 1];
  // Cornish-Fisher expansion around the normal quantile; below 1e-3 off for df > 30.
  const double z = 1.959964;
  const double n = static_cast<double>(df);
  return z + (z * z * z + z) / (4 * n) + (5 * std::pow(z, 5) + 16 * z * z * z + 3 * z) / (96 * n * n);
}

PerplexitySummary summarize_perplexity(const std::vector<double>& nll,
                                       const std::vector<std::size_t>& predictions) {
  PerplexitySummary s;
  s.windows = nll.size();
  double total = 0.0;
  for (std::size_t w = 0; w < nll.size(); ++w) {
    total += nll[w];
    s.predictions += predictions[w];
  }
  if (s.predictions == 0) return s;
  s.mean_nll = total / static_cast<double>(s.predictions);
  if (s.windows > 1) {
    double sum = 0.0;
    double sum_sq = 0.0;
    for (std::size_t w = 0; w < nll.size(); ++w) {
      const double mean = nll[w] / static_cast<double>(predictions[w]);
      sum += mean;
      sum_sq += mean * mean;
    }
    const double n = static_cast<double>(s.windows);
    const double variance = std::max(0.0, (sum_sq - sum * sum / n) / (n - 1));
    s.nll_stderr = std::sqrt(variance / n);
  }
  const double half_width = s.windows > 1 ? student_t_975(s.windows - 1) * s.nll_stderr : 0.0;
  s.perplexity = std::exp(s.mean_nll);
  s.ci_low = std::exp(s.mean_nll - half_width);
  s.ci_high = std::exp(s.mean_nll + half_width);
  return s;
}

}  // namespace echo::model
