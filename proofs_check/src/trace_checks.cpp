// The source-level checks on recorded traces: Eq. 21 with the measured q, Lemma 1 on the
// reference's output, and (informational) the mean-square partial sum against Remark 1.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "echo/ema_kernel.h"
#include "echo/proofs/check.h"
#include "echo/trace.h"
#include "reference_channel.h"
#include "tolerances.h"

namespace echo::proofs {
namespace {

constexpr const char* kExampleTrace = "data/examples/synthetic_p4.h5";
constexpr const char* kSmolDir = "data/smollm2";
constexpr const char* kGemmaDir = "data/gemma3";

// The bundled real-model traces: one folder per model, each expected to hold at least one trace.
constexpr const char* kModelDirs[] = {kSmolDir, kGemmaDir};

std::vector<std::string> default_traces(const std::string& root) {
  std::vector<std::string> paths = {root + "/" + kExampleTrace};
  for (const char* dir : kModelDirs) {
    const std::filesystem::path folder = std::filesystem::path(root) / dir;
    std::error_code ec;
    if (!std::filesystem::is_directory(folder, ec)) continue;
    std::vector<std::string> found;
    for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
      // Other HDF5 files live there too (tokenizer, logits): only echo-trace files are checked.
      TraceReader probe;
      if (entry.path().extension() == ".h5" && probe.open(entry.path().string()).ok()) {
        found.push_back(entry.path().string());
      }
    }
    std::sort(found.begin(), found.end());  // directory order is unspecified; the report's is not
    paths.insert(paths.end(), found.begin(), found.end());
  }
  return paths;
}

// The larger of two ratios, NaN winning: a NaN ratio (0 / 0 on an all-zero trace) must reach the
// verdict, which fails it, instead of vanishing in std::max.
double worse(double a, double b) { return std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b); }

// A trace whose data could not be read, or holds a non-finite value, cannot be checked: a FAIL that
// says why (a PASS computed from zeros or NaN would be a false verdict).
CheckResult unusable(const std::string& tag, const std::string& why) {
  CheckResult r = skipped(tag + ".data", "the trace's data is readable and finite", why);
  r.verdict = Verdict::kFail;
  return r;
}

// The post-norm's gain on site k's error, per token: w_k / rms of the token's row of the summed
// contributions (the norm's input); per site the median over the trace's tokens. Max over min of
// those medians is the spread the premise check compares with kMaxPreNormGainSpread.
Status gain_spread(const TraceReader& trace, const std::vector<SiteInfo>& sites, double* spread) {
  const TraceInfo& info = trace.info();
  const std::size_t h = static_cast<std::size_t>(*info.hidden);
  const std::size_t rows = info.count / h, ranks = static_cast<std::size_t>(info.ranks);
  std::vector<float> flat(info.count * ranks);
  double lo = INFINITY, hi = 0.0;
  for (std::size_t k = 0; k < info.sites; ++k) {
    std::vector<double> gains;
    for (std::size_t pass = 0; pass < info.passes; ++pass) {
      ECHO_TRY(trace.read_site(pass, k, flat.data()));
      for (std::size_t t = 0; t < rows; ++t) {
        double sq = 0.0;
        for (std::size_t e = t * h; e < (t + 1) * h; ++e) {
          double s = 0.0;
          for (std::size_t r = 0; r < ranks; ++r) s += flat[r * info.count + e];
          sq += s * s;
        }
        const double rms = std::sqrt(sq / static_cast<double>(h));
        if (rms > 0.0) gains.push_back(sites[k].weight_rms / rms);
      }
    }
    if (gains.empty()) continue;
    std::nth_element(gains.begin(), gains.begin() + gains.size() / 2, gains.end());
    const double median = gains[gains.size() / 2];
    lo = std::min(lo, median);
    hi = std::max(hi, median);
  }
  *spread = hi > 0.0 ? hi / lo : 1.0;
  return Status::Ok();
}

void check_premise(const TraceReader& trace, const std::string& tag, std::vector<CheckResult>* out) {
  const TraceInfo& info = trace.info();
  const std::string name = tag + ".prenorm";
  const std::string statement = "post-norm gain spread across sites (max/min of per-site medians)";
  if (!info.post_norm) {
    out->push_back(skipped(name, statement, "the trace does not record post_norm (docs/trace-format.md)"));
    return;
  }
  double spread = 1.0;
  if (*info.post_norm == "rmsnorm") {
    if (Status s = gain_spread(trace, trace_sites(info), &spread); !s.ok()) {
      out->push_back(unusable(tag, s.message()));
      return;
    }
  }
  out->push_back(premise_at_most(
      name, statement, spread, kMaxPreNormGainSpread,
      *info.post_norm == "none" ? "no post-norm: every gain is 1" : std::to_string(info.sites) + " post-norm sites",
      "POST-NORM: the theorems' pre-norm premise does not hold (errors reach the residual stream scaled by "
      "per-site gains; docs/results-gemma3.md); --compensator-units stream"));
}

void check_trace(const std::string& path, std::vector<CheckResult>* out) {
  const std::string tag = "trace." + std::filesystem::path(path).stem().string();
  TraceReader trace;
  if (Status s = trace.open(path); !s.ok()) {
    out->push_back(skipped(tag, "source checks on a recorded trace", "not usable: " + s.message()));
    return;
  }
  const TraceInfo& info = trace.info();
  AllReduceSpec spec;  // defaults: 4-bit zero-aware, dual, global, eta 0.75
  spec.dtype = info.dtype;
  spec.direction = info.direction;
  const EmaKernel kernel = EmaKernel::from(spec.compensator);
  double worst_bound = 0.0, worst_lemma = 0.0, worst_ms = 0.0;
  for (std::size_t pass = 0; pass < info.passes; ++pass) {
    SourceRun run;
    Status data;  // the first read failure or non-finite value of this pass
    const Status s = run_allreduce(spec, info.ranks, info.count, info.sites,
                                   [&](std::size_t site, std::vector<std::vector<float>>& x) {
                                     std::vector<float> flat(info.count * static_cast<std::size_t>(info.ranks), 0.0f);
                                     if (data.ok()) data = trace.read_site(pass, site, flat.data());
                                     if (data.ok()) data = trace.find_nonfinite(pass, site, flat.data(), info.dtype);
                                     if (!data.ok()) std::fill(flat.begin(), flat.end(), 0.0f);
                                     for (std::size_t r = 0; r < x.size(); ++r)
                                       std::copy(flat.begin() + r * info.count, flat.begin() + (r + 1) * info.count, x[r].begin());
                                   },
                                   &run);
    if (!data.ok()) {
      out->push_back(unusable(tag, data.message()));
      return;
    }
    if (!s.ok()) {
      out->push_back(skipped(tag, "source checks on a recorded trace", s.message()));
      return;
    }
    double q = 0.0, scale = 0.0;
    for (Eigen::Index j = 0; j < run.injected.cols(); ++j) q = std::max(q, run.injected.col(j).norm());
    for (double v : run.rounding_scale) scale += v;
    const double allowed = kernel.partial_sum_bound(info.sites, q) + kRoundingsPerElement * kFp32Unit * scale;
    worst_bound = worse(worst_bound, max_partial_sum(run) / allowed);
    double residual = 0.0, allowance = 0.0;
    worst_lemma = worse(worst_lemma, tail_representation_ratio(run, spec.compensator, &residual, &allowance));
    Eigen::VectorXd s_t = Eigen::VectorXd::Zero(run.net.rows());
    for (Eigen::Index t = 0; t < run.net.cols(); ++t) {
      s_t += run.net.col(t);
      worst_ms = worse(worst_ms, s_t.squaredNorm() / (q * q * kernel.phi_square_sum(static_cast<std::size_t>(t))));
    }
  }
  const std::string note = std::to_string(info.passes) + " passes x " + std::to_string(info.sites) + " sites, P=" +
                           std::to_string(info.ranks) + ", 4-bit zero-aware dual eta=0.75";
  out->push_back(at_most(tag + ".eq21", "max_t ||S_t|| / (Eq. 21 bound at measured q + fp32)", worst_bound, 1.0, note));
  out->push_back(at_most(tag + ".lemma1", "||S_t - sum phi delta|| / fp32 allowance", worst_lemma, 1.0, note));
  out->push_back(proofs::info(tag + ".remark1", "max_t ||S_t||^2 / (q^2 sum phi^2) (noise model not assumed)", worst_ms, note));
  check_premise(trace, tag, out);
}

}  // namespace

std::vector<CheckResult> trace_checks(const ProveOptions& options) {
  std::vector<CheckResult> out;
  const std::vector<std::string> paths = options.traces.empty() ? default_traces(options.source_dir) : options.traces;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (!std::filesystem::exists(p, ec)) {
      out.push_back(skipped("trace." + std::filesystem::path(p).stem().string(), "source checks on a recorded trace",
                            "not present: " + p));
      continue;
    }
    check_trace(p, &out);
  }
  for (const char* dir : kModelDirs) {
    const std::string model = std::filesystem::path(dir).filename().string();
    bool present = false;
    for (const std::string& p : paths) present = present || p.find(model) != std::string::npos;
    if (!present) {
      out.push_back(skipped("trace." + model, "source checks on " + model + " traces",
                            std::string("not present: no .h5 under ") + dir));
    }
  }
  return out;
}

}  // namespace echo::proofs
