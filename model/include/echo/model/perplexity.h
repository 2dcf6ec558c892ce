// Perplexity over windows of a token stream: window placement, per-window negative log-likelihood
// and a confidence interval over windows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "echo/model/weights.h"
#include "echo/status.h"

namespace echo::model {

// num_windows non-overlapping windows of length tokens, spread evenly over num_tokens tokens
// (first at 0, last ending at the stream's end when there is room for more than one).
Status plan_windows(std::size_t num_tokens, int num_windows, int length,
                    std::vector<std::size_t>* starts);

// Sum over t < T-1 of -log softmax(logits[t])[tokens[t+1]], in double: the loss of predicting
// each token of the window from the ones before it (the first token has no prediction).
double window_nll(const Matrix& logits, const std::vector<std::int32_t>& tokens);

struct PerplexitySummary {
  std::size_t windows = 0;
  std::size_t predictions = 0;
  double mean_nll = 0.0;       // per predicted token, over all windows
  double nll_stderr = 0.0;     // standard error of the mean over windows (0 for one window)
  double perplexity = 0.0;     // exp(mean_nll)
  double ci_low = 0.0;         // 95% Student-t interval over windows, mapped through exp
  double ci_high = 0.0;
};

// window_nll[w] and window_predictions[w] for each window (equal lengths give equal weights).
PerplexitySummary summarize_perplexity(const std::vector<double>& window_nll,
                                       const std::vector<std::size_t>& window_predictions);

// Two-sided 97.5% quantile of Student's t with df degrees of freedom.
double student_t_975(std::size_t df);

}  // namespace echo::model
