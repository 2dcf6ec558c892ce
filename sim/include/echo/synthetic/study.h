// Compensator settings side by side (off, single, dual; global and local residual; gains), on a
// synthetic network and on a recorded trace: injected error q, max ||S_t||, the propagated
// output deviation where a network is available.
#pragma once

#include <string>
#include <vector>

#include "echo/allreduce.h"
#include "echo/status.h"
#include "echo/synthetic/prenorm_network.h"
#include "echo/trace.h"

namespace echo::synthetic {

struct CompensatorSetting {
  std::string label;  // e.g. "dual/global/0.75"
  CompensatorSpec spec;
};

// off; single and dual, each with the global and the local residual, at the given gains.
std::vector<CompensatorSetting> compensator_grid(const std::vector<float>& gains,
                                                 const CompensatorSpec& coefficients);

struct StudyRow {
  std::string quantizer;
  std::string setting;
  double q = 0.0;                 // max_k ||delta_k||
  double mean_injected = 0.0;     // mean_k ||delta_k||
  double max_partial_sum = 0.0;   // max_t ||S_t||
  double final_partial_sum = 0.0; // sqrt(mean over passes of ||S_{N-1}||^2)
  double bound = 0.0;             // Eq. 21 with this run's q
  // Network: mean over passes of ||E_N||^2 / (d sigma_N^2). Trace with hidden states: max_t
  // ||S_t|| / (sqrt(n) sigma_{t+1}). Otherwise NaN.
  double deviation = 0.0;
  double mean_deviation = 0.0;    // network: mean over depths 1..N of the same ratio; else NaN
};

Status study_network(const PreNormNetwork& net, const AllReduceSpec& base,
                     const std::vector<CompensatorSetting>& settings, std::size_t passes,
                     std::vector<StudyRow>* rows);

// The trace's passes through the reference all-reduce; base.dtype is replaced by the trace's.
Status study_trace(const TraceReader& trace, const AllReduceSpec& base,
                   const std::vector<CompensatorSetting>& settings, std::vector<StudyRow>* rows);

}  // namespace echo::synthetic
