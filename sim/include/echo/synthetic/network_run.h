// Runs a synthetic pre-norm network twice per input: with the exact fp32 all-reduce of its P
// partial contributions, and with the quantized (compensated) all-reduce of the reference, and
// measures the source (delta_k, C_k, S_t) and the propagated output deviation E_k.
#pragma once

#include <string>
#include <vector>

#include "echo/allreduce.h"
#include "echo/status.h"
#include "echo/synthetic/prenorm_network.h"

namespace echo::synthetic {

struct NetworkRun {
  std::size_t passes = 0;
  double q = 0.0;                  // max_k ||delta_k|| over passes and sites
  double mean_injected = 0.0;      // mean ||delta_k||
  double max_partial_sum = 0.0;    // max_t ||S_t||
  // Per site k = 0..N-1, mean over passes:
  std::vector<double> injected_norm;     // ||delta_k||
  std::vector<double> correction_norm;   // ||C_k||
  std::vector<double> partial_sum_norm;  // ||S_k||
  // ||E_{k+1}||^2 / (d sigma_{k+1}^2): the deviation of the hidden state after site k against
  // the exact run, relative to its energy (E_N of a network truncated to depth k + 1).
  std::vector<double> deviation;
  std::vector<double> sigma;             // sigma_{k+1} of the exact run
};

// `passes` inputs (initial_state(0..passes-1)); the compensator state resets for each.
Status run_network(const PreNormNetwork& net, const AllReduceSpec& spec, std::size_t passes,
                   NetworkRun* run);

// Writes the exact run's contributions and hidden states as an echo-trace file.
Status write_network_trace(const PreNormNetwork& net, DType dtype, std::size_t passes,
                           const std::string& path);

}  // namespace echo::synthetic
