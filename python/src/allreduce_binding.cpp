#include "allreduce_binding.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "arrays.h"
#include "echo/site.h"
#include "echo/status.h"

namespace echotk {

void raise_if_error(const echo::Status& status) {
  if (status.ok()) return;
  if (status.code() == echo::StatusCode::kInvalidArgument) throw nb::value_error(status.message().c_str());
  throw std::runtime_error(std::string(echo::status_code_name(status.code())) + ": " + status.message());
}

echo::Direction parse_direction(const std::string& direction) {
  if (direction == "forward") return echo::Direction::kForward;
  if (direction == "backward") return echo::Direction::kBackward;
  throw nb::value_error(("direction must be 'forward' or 'backward', got '" + direction + "'").c_str());
}

namespace {

echo::DType parse_dtype_name(const char* what, const std::string& name) {
  const std::optional<echo::DType> dtype = echo::parse_dtype(name);
  if (!dtype) {
    throw nb::value_error((std::string(what) + " must be one of fp32, bf16, fp16 (or float32, bfloat16, float16), got '" +
                           name + "'").c_str());
  }
  return *dtype;
}

// The replay metrics of one call (sim/src/replay.cpp): sums over ranks in order, in float64.
void fill_norms(int ranks, std::size_t n, const float* x, const float* xp, const float* y, double* report) {
  double injected = 0.0, net = 0.0, correction = 0.0, sum = 0.0, nonfinite = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    double sx = 0.0, sxp = 0.0;
    for (int r = 0; r < ranks; ++r) {
      const float v = x[static_cast<std::size_t>(r) * n + i];
      if (!std::isfinite(v)) nonfinite += 1.0;
      sx += static_cast<double>(v);
      sxp += static_cast<double>(xp[static_cast<std::size_t>(r) * n + i]);
    }
    const double yi = static_cast<double>(y[i]);
    injected += (yi - sxp) * (yi - sxp);
    net += (yi - sx) * (yi - sx);
    correction += (sxp - sx) * (sxp - sx);
    sum += sx * sx;
  }
  report[kNonFiniteInputs] = nonfinite;
  report[kInjectedNorm] = std::sqrt(injected);
  report[kNetNorm] = std::sqrt(net);
  report[kCorrectionNorm] = std::sqrt(correction);
  report[kSumNorm] = std::sqrt(sum);
}

std::vector<const float*> rows(const std::vector<float>& data, int ranks, std::size_t n) {
  std::vector<const float*> p(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) p[static_cast<std::size_t>(r)] = data.data() + static_cast<std::size_t>(r) * n;
  return p;
}
std::vector<float*> rows(std::vector<float>& data, int ranks, std::size_t n) {
  std::vector<float*> p(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) p[static_cast<std::size_t>(r)] = data.data() + static_cast<std::size_t>(r) * n;
  return p;
}

}  // namespace

std::optional<echo::SiteInfo> site_of(std::int64_t site_row, double site_weight_rms, std::int64_t site_kind) {
  if (site_row < 0) return std::nullopt;
  echo::SiteInfo site;
  if (site_row > 0) {
    site.has_post_norm = true;
    site.row_length = static_cast<std::size_t>(site_row);
    site.weight_rms = static_cast<float>(site_weight_rms);
  }
  if (site_kind == 0 || site_kind == 1) site.kind = static_cast<echo::SiteKind>(site_kind);
  return site;
}

std::optional<echo::SiteInfo> required_site(const echo::AllReduceSpec& spec, std::int64_t site_row,
                                            double site_weight_rms, std::int64_t site_kind) {
  std::optional<echo::SiteInfo> site = site_of(site_row, site_weight_rms, site_kind);
  if (echo::needs_site(spec) && !site) {
    throw nb::value_error("compensator_units='stream' needs each forward call's site: call the all-reduce as "
                          "ar(parts, direction, site=echotk.nn.Site(...)), as echotk.tensor_parallel does");
  }
  return site;
}

namespace {

// Compensator gains 'sum' (docs/numerics.md 6.1, step 8) at a post-norm site: the states' row
// ratios travel as ratios [kSiteKinds, P, rows] fp32 and ratios_held [kSiteKinds] uint8 (1: that
// kind's ratios are held), read unless fresh and written back.
struct RowRatios {
  float* values = nullptr;
  std::uint8_t* held = nullptr;
  std::size_t rows = 0;
};

RowRatios check_row_ratios(const echo::AllReduceSpec& spec, const std::optional<echo::SiteInfo>& site, int ranks,
                           std::size_t n, std::optional<AnyArray>& ratios, std::optional<AnyArray>& held) {
  const bool needed = echo::needs_site(spec) && site && site->has_post_norm &&
                      spec.compensator.gains == echo::CompensatorGains::kSum;
  if (!needed) return {};
  if (!ratios || !held) {
    throw nb::value_error("compensator_gains='sum' needs the state's row ratios at a post-norm site: pass ratios "
                          "[2, P, rows] fp32 and ratios_held [2] uint8, as echotk.AllReduce does");
  }
  RowRatios r;
  r.rows = n / site->row_length;
  check_float32(*ratios, "ratios", {echo::kSiteKinds, ranks, static_cast<std::int64_t>(r.rows)});
  check_uint8(*held, "ratios_held", echo::kSiteKinds, nb::device::cpu::value);
  r.values = static_cast<float*>(ratios->data());
  r.held = static_cast<std::uint8_t*>(held->data());
  return r;
}

// One Echo all-reduce: parts [P, n] -> out [n]; m1, m2 [P, n] fp32 hold the compensator state
// (read unless fresh, written back); report [kNumReportSlots] float64 receives the report.
void allreduce(const SpecHandle& h, const std::string& direction, AnyArray parts, AnyArray out,
               AnyArray m1, AnyArray m2, bool fresh, AnyArray report, std::int64_t site_row,
               double site_weight_rms, std::optional<AnyArray> site_weights, std::int64_t site_kind,
               std::optional<AnyArray> ratios, std::optional<AnyArray> ratios_held) {
  echo::AllReduceSpec spec = h.spec;
  spec.direction = parse_direction(direction);
  const int P = h.ranks;
  const Storage in_storage = check_values(parts, "parts", spec.dtype, {P, -1});
  const auto n = static_cast<std::size_t>(parts.shape(1));
  if (n == 0) throw nb::value_error("parts has no elements (shape [P, 0]); n must be >= 1");
  const Storage out_storage = check_values(out, "out", spec.dtype, {static_cast<std::int64_t>(n)});
  const bool compensate = spec.compensator.mode != echo::CompensatorMode::kOff;
  const bool dual = spec.compensator.mode == echo::CompensatorMode::kDual;
  if (compensate) check_float32(m1, "state m1", {P, static_cast<std::int64_t>(n)});
  if (dual) check_float32(m2, "state m2", {P, static_cast<std::int64_t>(n)});
  check_float64(report, "report", {kNumReportSlots});
  std::optional<echo::SiteInfo> site = required_site(spec, site_row, site_weight_rms, site_kind);
  if (site_weights && site && site->has_post_norm) {
    check_float32(*site_weights, "site_weights", {site_row});
    const auto* w = static_cast<const float*>(site_weights->data());
    site->weights.assign(w, w + site_row);
  }
  const RowRatios kept = check_row_ratios(spec, site, P, n, ratios, ratios_held);

  const std::size_t total = static_cast<std::size_t>(P) * n;
  echo::Status status;
  {
    nb::gil_scoped_release release;
    std::vector<float> x(total), y(total), xp(total);
    load_values(parts.data(), in_storage, spec.dtype, total, x.data());
    std::vector<echo::CompensatorState> states(compensate ? static_cast<std::size_t>(P) : 0);
    auto* m1_data = static_cast<float*>(m1.data());
    auto* m2_data = static_cast<float*>(m2.data());
    for (std::size_t r = 0; r < states.size() && !fresh; ++r) {
      states[r].m1.assign(m1_data + r * n, m1_data + (r + 1) * n);
      if (dual) states[r].m2.assign(m2_data + r * n, m2_data + (r + 1) * n);
      for (std::size_t k = 0; kept.values != nullptr && k < echo::kSiteKinds; ++k) {
        if (kept.held[k] == 0) continue;
        const float* from = kept.values + (k * states.size() + r) * kept.rows;
        states[r].row_ratios[k].assign(from, from + kept.rows);
      }
    }
    echo::AllReduceReport rep;
    const auto in = rows(x, P, n);
    const auto outs = rows(y, P, n);
    const auto comp = rows(xp, P, n);
    status = site ? echo::allreduce_at_site(*site, spec, P, n, in.data(), outs.data(),
                                            compensate ? states.data() : nullptr, comp.data(), &rep)
                  : echo::allreduce(spec, P, n, in.data(), outs.data(), compensate ? states.data() : nullptr,
                                    comp.data(), &rep);
    if (status.ok()) {
      for (std::size_t r = 0; r < states.size(); ++r) {
        std::copy(states[r].m1.begin(), states[r].m1.end(), m1_data + r * n);
        if (dual) std::copy(states[r].m2.begin(), states[r].m2.end(), m2_data + r * n);
        for (std::size_t k = 0; kept.values != nullptr && k < echo::kSiteKinds; ++k) {
          std::copy(states[r].row_ratios[k].begin(), states[r].row_ratios[k].end(),
                    kept.values + (k * states.size() + r) * kept.rows);
          kept.held[k] = states[r].row_ratios[k].empty() ? 0 : 1;
        }
      }
      store_values(y.data(), out_storage, spec.dtype, n, out.data());
      auto* stats = static_cast<double*>(report.data());
      stats[kPoisonedGroups] = static_cast<double>(rep.poisoned_groups);
      stats[kScaleExponent] = rep.scale_exponent;
      stats[kExactPath] = rep.exact_path ? 1.0 : 0.0;
      fill_norms(P, n, x.data(), xp.data(), y.data(), stats);
    }
  }
  raise_if_error(status);
}

// The exact all-reduce: fp32 sum in rank order, rounded once to dtype (the "16-bit" baseline).
void exact_allreduce(const std::string& dtype_name, int ranks, AnyArray parts, AnyArray out, AnyArray report) {
  const echo::DType dtype = parse_dtype_name("dtype", dtype_name);
  if (ranks < 1 || ranks > echo::kMaxRanks) {
    throw nb::value_error(("ranks must lie in [1, " + std::to_string(echo::kMaxRanks) + "], got " +
                           std::to_string(ranks)).c_str());
  }
  const Storage in_storage = check_values(parts, "parts", dtype, {ranks, -1});
  const auto n = static_cast<std::size_t>(parts.shape(1));
  if (n == 0) throw nb::value_error("parts has no elements (shape [P, 0]); n must be >= 1");
  const Storage out_storage = check_values(out, "out", dtype, {static_cast<std::int64_t>(n)});
  check_float64(report, "report", {kNumReportSlots});
  nb::gil_scoped_release release;
  const std::size_t total = static_cast<std::size_t>(ranks) * n;
  std::vector<float> x(total), y(n);
  load_values(parts.data(), in_storage, dtype, total, x.data());
  echo::round_to_dtype(x.data(), total, dtype);
  const auto in = rows(x, ranks, n);
  echo::exact_allreduce(dtype, ranks, n, in.data(), y.data());
  store_values(y.data(), out_storage, dtype, n, out.data());
  auto* stats = static_cast<double*>(report.data());
  stats[kPoisonedGroups] = 0.0;
  stats[kScaleExponent] = 0.0;
  stats[kExactPath] = 1.0;
  fill_norms(ranks, n, x.data(), x.data(), y.data(), stats);
}

// echo::post_norm_site(weights).weight_rms: the RMS of a post-norm's effective weights [H] as the
// stream units form it (docs/numerics.md 6.1).
double post_norm_weight_rms(AnyArray weights) {
  check_float32(weights, "post-norm weights", {-1});
  const auto* w = static_cast<const float*>(weights.data());
  const std::size_t h = weights.shape(0);
  if (h == 0) throw nb::value_error("the post-norm has no weights (shape [0])");
  for (std::size_t i = 0; i < h; ++i) {
    if (!std::isfinite(w[i])) {
      throw nb::value_error(("the post-norm's weight " + std::to_string(i) + " is not finite").c_str());
    }
  }
  return echo::post_norm_site(std::vector<float>(w, w + h)).weight_rms;
}

}  // namespace

void register_allreduce(nb::module_& m) {
  m.def("allreduce", &allreduce, nb::arg("spec"), nb::arg("direction"), nb::arg("parts"), nb::arg("out"),
        nb::arg("m1"), nb::arg("m2"), nb::arg("fresh"), nb::arg("report"), nb::arg("site_row") = -1,
        nb::arg("site_weight_rms") = 0.0, nb::arg("site_weights").none() = nb::none(), nb::arg("site_kind") = -1,
        nb::arg("ratios").none() = nb::none(), nb::arg("ratios_held").none() = nb::none(),
        "echo::allreduce over parts [P, n] into out [n]; m1, m2 [P, n] fp32 compensator state; site_row >= 0 "
        "gives the call's site (echo::allreduce_at_site: 0 without a post-norm, else its row length and "
        "site_weight_rms); site_weights: the post-norm's weights [site_row] fp32 (compensator profile "
        "'sqrt', compensator 'deficit'), or None; site_kind: 0 attention, 1 MLP, -1 unknown; ratios [2, P, n / site_row] fp32 and "
        "ratios_held [2] uint8: the states' row ratios (compensator gains 'sum'), or None.");
  m.def("post_norm_weight_rms", &post_norm_weight_rms, nb::arg("weights"),
        "RMS of a post-norm's effective weights [H] (float32) as compensator units 'stream' form it.");
  m.def("exact_allreduce", &exact_allreduce, nb::arg("dtype"), nb::arg("ranks"), nb::arg("parts"),
        nb::arg("out"), nb::arg("report"),
        "echo::exact_allreduce: fp32 sum of parts [P, n] in rank order, rounded once into out [n].");
  m.attr("REPORT_SLOTS") = static_cast<int>(kNumReportSlots);
}

}  // namespace echotk
