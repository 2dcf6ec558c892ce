#include "echo/synthetic/study.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "echo/ema_kernel.h"
#include "echo/replay.h"
#include "echo/synthetic/network_run.h"

namespace echo::synthetic {
namespace {

std::string gain_label(float eta) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", static_cast<double>(eta));
  return buf;
}

}  // namespace

std::vector<CompensatorSetting> compensator_grid(const std::vector<float>& gains,
                                                 const CompensatorSpec& coefficients) {
  std::vector<CompensatorSetting> grid;
  CompensatorSpec off = coefficients;
  off.mode = CompensatorMode::kOff;
  grid.push_back({"off", off});
  for (CompensatorMode mode : {CompensatorMode::kSingle, CompensatorMode::kDual}) {
    for (ResidualMode residual : {ResidualMode::kGlobal, ResidualMode::kLocal}) {
      for (float eta : gains) {
        CompensatorSpec s = coefficients;
        s.mode = mode;
        s.residual = residual;
        s.eta = eta;
        grid.push_back({std::string(compensator_mode_name(mode)) + "/" + residual_mode_name(residual) +
                            "/" + gain_label(eta),
                        s});
      }
    }
  }
  return grid;
}

Status study_network(const PreNormNetwork& net, const AllReduceSpec& base,
                     const std::vector<CompensatorSetting>& settings, std::size_t passes,
                     std::vector<StudyRow>* rows) {
  for (const CompensatorSetting& setting : settings) {
    AllReduceSpec spec = base;
    spec.compensator = setting.spec;
    NetworkRun run;
    ECHO_TRY(run_network(net, spec, passes, &run));
    StudyRow row;
    row.quantizer = quantizer_name(spec.quant.kind);
    row.setting = setting.label;
    row.q = run.q;
    row.mean_injected = run.mean_injected;
    row.max_partial_sum = run.max_partial_sum;
    row.final_partial_sum = run.partial_sum_norm.back();
    row.bound = EmaKernel::from(spec.compensator).partial_sum_bound(net.depth(), run.q);
    row.deviation = run.deviation.back();
    double total = 0.0;
    for (double v : run.deviation) total += v;
    row.mean_deviation = total / static_cast<double>(run.deviation.size());
    rows->push_back(row);
  }
  return Status::Ok();
}

Status study_trace(const TraceReader& trace, const AllReduceSpec& base,
                   const std::vector<CompensatorSetting>& settings, std::vector<StudyRow>* rows) {
  const TraceInfo& info = trace.info();
  const std::size_t n = info.count;
  const auto ranks = static_cast<std::size_t>(info.ranks);
  SiteBuffers buf(ranks, n);
  std::vector<float> hidden(info.has_hidden_states ? (info.sites + 1) * n : 0);
  for (const CompensatorSetting& setting : settings) {
    AllReduceSpec spec = base;
    spec.dtype = info.dtype;
    spec.direction = info.direction;
    spec.compensator = setting.spec;
    ECHO_TRY(spec.validate(info.ranks));
    StudyRow row;
    row.quantizer = quantizer_name(spec.quant.kind);
    row.setting = setting.label;
    row.deviation = info.has_hidden_states ? 0.0 : std::numeric_limits<double>::quiet_NaN();
    row.mean_deviation = std::numeric_limits<double>::quiet_NaN();
    double final_sq = 0.0;
    std::vector<CompensatorState> states(ranks);
    std::vector<double> partial(n);
    AllReduceWorkspace workspace;
    for (std::size_t pass = 0; pass < info.passes; ++pass) {
      for (CompensatorState& s : states) s.reset();
      std::fill(partial.begin(), partial.end(), 0.0);
      if (info.has_hidden_states) {
        ECHO_TRY(trace.read_hidden_states(pass, hidden.data()));
      }
      for (std::size_t site = 0; site < info.sites; ++site) {
        ECHO_TRY(trace.read_site(pass, site, buf.x.data()));
        round_to_dtype(buf.x.data(), buf.x.size(), spec.dtype);
        AllReduceReport report;
        ECHO_TRY(allreduce(spec, info.ranks, n, buf.in.data(), buf.out.data(), states.data(), buf.compensated.data(), &report, &workspace));
        double delta_sq = 0.0, partial_sq = 0.0, hidden_sq = 0.0;
        for (std::size_t i = 0; i < n; ++i) {
          const double sx = rank_sum(buf.x.data(), ranks, n, i);
          const double sxp = rank_sum(buf.xp.data(), ranks, n, i);
          const double yi = static_cast<double>(buf.y[i]);
          delta_sq += (yi - sxp) * (yi - sxp);
          partial[i] += yi - sx;
          partial_sq += partial[i] * partial[i];
          if (info.has_hidden_states) {
            const double h = static_cast<double>(hidden[(site + 1) * n + i]);
            hidden_sq += h * h;
          }
        }
        const double delta = std::sqrt(delta_sq), ps = std::sqrt(partial_sq);
        row.q = std::max(row.q, delta);
        row.mean_injected += delta;
        row.max_partial_sum = std::max(row.max_partial_sum, ps);
        // ||S_t|| / (sqrt(n) sigma_{t+1}) = ||S_t|| / ||z_{t+1}||.
        if (info.has_hidden_states && hidden_sq > 0.0) {
          row.deviation = std::max(row.deviation, ps / std::sqrt(hidden_sq));
        }
        if (site + 1 == info.sites) final_sq += partial_sq;
      }
    }
    row.mean_injected /= static_cast<double>(info.passes * info.sites);
    row.final_partial_sum = std::sqrt(final_sq / static_cast<double>(info.passes));
    row.bound = EmaKernel::from(spec.compensator).partial_sum_bound(info.sites, row.q);
    rows->push_back(row);
  }
  return Status::Ok();
}

}  // namespace echo::synthetic
