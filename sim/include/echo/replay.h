// Replays a recorded trace through an all-reduce backend and measures the error process:
// injected errors delta_k, net errors rho_k, partial sums S_t, q, and the bound of Eq. 21.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "echo/allreduce.h"
#include "echo/backend.h"
#include "echo/status.h"
#include "echo/trace.h"

namespace echo {

struct ReplayOptions {
  AllReduceSpec spec;             // dtype is taken from the trace unless dtype_override is set
  std::optional<DType> dtype_override;
  bool save_outputs = false;      // write /outputs [passes, sites, ranks, n]
  bool allow_nonfinite = false;   // otherwise a NaN/Inf contribution is refused, naming its place
  // Called after every site with (pass, site); may print progress.
  std::function<void(std::size_t, std::size_t)> on_site;
};

struct ReplaySummary {
  TraceInfo trace;
  DType dtype = DType::kFloat32;
  double q = 0.0;                 // max_k ||delta_k|| over all passes and sites
  double mean_injected_norm = 0.0;
  double max_partial_sum = 0.0;   // max_t ||S_t||
  double bound = 0.0;             // Eq. 21 at the configured gain, N = sites
  double mu_w = 0.0;
  double tau_2 = 0.0;
  double final_partial_sum = 0.0; // mean over passes of ||S_{N-1}||
  double relative_output_error = 0.0;  // mean over sites of ||rho_k|| / ||sum_i x_k,i||
  double mean_correction_norm = 0.0;   // mean over sites of ||C_k||, C_k = sum_i (x'_k,i - x_k,i)
  double rms_partial_sum = 0.0;        // sqrt of the mean over passes and sites of ||S_t||^2
  // Remark 1's scale at the configured gain: q sqrt(sum_{m<N} phi_m^2), the bound on the root
  // mean square of ||S_t|| when the errors follow the noise model (not assumed, compared).
  double remark1_bound = 0.0;
  double theorem1_bound = 0.0;         // (1 + mu_w) q, Theorem 1's bound at gain 1
  // With /hidden_states: max over passes and sites of ||S_t|| / (sqrt(n) sigma_{t+1}), the
  // partial sum against the hidden state it perturbs; NaN without hidden states.
  double max_relative_deviation = 0.0;
  std::size_t poisoned_groups = 0;
  std::size_t exact_path_sites = 0;
  double seconds = 0.0;           // wall time of the backend calls
};

// sum_r values[r * count + i] over the ranks in order, in float64: how the metrics form sum_i x_i
// and sum_i x'_i (docs/numerics.md, section 7).
inline double rank_sum(const float* values, std::size_t ranks, std::size_t count, std::size_t i) {
  double sum = 0.0;
  for (std::size_t r = 0; r < ranks; ++r) sum += static_cast<double>(values[r * count + i]);
  return sum;
}

// One site of every rank, each array [ranks][count] (inputs x, outputs y, x'), with the per-rank
// pointers the all-reduce takes.
struct SiteBuffers {
  SiteBuffers(std::size_t ranks, std::size_t count)
      : x(ranks * count), y(ranks * count), xp(ranks * count), in(ranks), out(ranks), compensated(ranks) {
    for (std::size_t r = 0; r < ranks; ++r) {
      in[r] = x.data() + r * count;
      out[r] = y.data() + r * count;
      compensated[r] = xp.data() + r * count;
    }
  }
  std::vector<float> x, y, xp;
  std::vector<const float*> in;
  std::vector<float*> out, compensated;
};

// The trace must already be open. The result file is written to out_path atomically.
Status replay_trace(const TraceReader& trace, const std::string& out_path,
                    const ReplayOptions& options, AllReduceBackend& backend,
                    ReplaySummary* summary);

}  // namespace echo
