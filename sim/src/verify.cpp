#include "echo/verify.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <utility>

#include "echo/alternatives.h"
#include "echo/backend.h"
#include "echo/outputs_file.h"
#include "echo/replay.h"
#include "echo/text_output.h"

namespace echo {
namespace {

// A differing element counts as "within one step" when |received - expected| is at most this many
// quantization steps of its group, (max - min) / L of the expected values: one code off, plus
// room for the dtype rounding of the delivered values.
constexpr double kOneStepSlack = 1.05;

// Word <-> value in the encoding of the outputs file.
struct Words {
  OutputsEncoding encoding;
  DType dtype;
  std::uint32_t of(float v) const {
    if (encoding == OutputsEncoding::kFloat32) {
      std::uint32_t b;
      std::memcpy(&b, &v, sizeof b);
      return b;
    }
    return dtype == DType::kBFloat16 ? float_to_bfloat16_bits(v) : float_to_half_bits(v);
  }
  float value(std::uint32_t w) const {
    if (encoding == OutputsEncoding::kFloat32) {
      float v;
      std::memcpy(&v, &w, sizeof v);
      return v;
    }
    return dtype == DType::kBFloat16 ? bfloat16_bits_to_float(static_cast<std::uint16_t>(w))
                                     : half_bits_to_float(static_cast<std::uint16_t>(w));
  }
  // The canonical NaN word for any NaN (docs/numerics.md 1); other words unchanged.
  std::uint32_t canonical(std::uint32_t w) const {
    if (encoding == OutputsEncoding::kFloat32) return (w & 0x7FFFFFFFu) > 0x7F800000u ? kCanonicalNaNFloat : w;
    if (dtype == DType::kBFloat16) return (w & 0x7FFFu) > 0x7F80u ? kCanonicalNaNBFloat16 : w;
    return (w & 0x7FFFu) > 0x7C00u ? kCanonicalNaNHalf : w;
  }
};

using SiteVisitor = std::function<Status(std::size_t pass, std::size_t site, const float* outputs)>;

// Every pass and site of the trace through the backend, in order; visit gets [ranks * n] outputs.
Status run_trace(const TraceReader& trace, AllReduceBackend& backend, const SiteVisitor& visit) {
  const TraceInfo& info = trace.info();
  SiteBuffers buf(static_cast<std::size_t>(info.ranks), info.count);
  const std::vector<SiteInfo> sites = trace_sites(info);
  for (std::size_t pass = 0; pass < info.passes; ++pass) {
    backend.start_pass();
    for (std::size_t site = 0; site < info.sites; ++site) {
      ECHO_TRY(trace.read_site(pass, site, buf.x.data()));
      AllReduceReport report;
      if (Status s = backend.run(info.count, buf.in.data(), buf.out.data(), buf.compensated.data(), &report,
                                 sites.empty() ? nullptr : &sites[site]);
          !s.ok()) {
        return Status(s.code(), "pass " + std::to_string(pass) + ", site " + std::to_string(site) + ": " +
                                    s.message());
      }
      ECHO_TRY(visit(pass, site, buf.y.data()));
    }
  }
  return Status::Ok();
}

// What the per-group checks found over every group holding a difference.
struct GroupFindings {
  std::size_t groups = 0;           // (pass, site, rank, group) with at least one difference
  std::size_t same_code_groups = 0; // received values an order-preserving function of the expected ones
  std::size_t within_step_elements = 0;
};

// One rank's group [begin, end) of a site with at least one difference.
void inspect_group(const float* expected, const float* received, std::size_t begin, std::size_t end,
                   int max_code, GroupFindings* findings) {
  ++findings->groups;
  float lo = INFINITY, hi = -INFINITY;
  std::vector<std::pair<float, float>> pairs;
  for (std::size_t e = begin; e < end; ++e) {
    if (!std::isfinite(expected[e])) continue;
    lo = std::min(lo, expected[e]);
    hi = std::max(hi, expected[e]);
    if (!std::isnan(received[e])) pairs.emplace_back(expected[e], received[e]);
  }
  const double step = hi > lo ? (static_cast<double>(hi) - lo) / max_code : 0.0;
  for (std::size_t e = begin; e < end; ++e) {
    if (expected[e] == received[e] || !std::isfinite(expected[e]) || !std::isfinite(received[e])) continue;
    if (std::fabs(static_cast<double>(received[e]) - expected[e]) <= kOneStepSlack * step) {
      ++findings->within_step_elements;
    }
  }
  // Same codes, other parameters: equal expected values stay equal, larger ones stay larger.
  std::sort(pairs.begin(), pairs.end());
  bool monotone = pairs.size() >= 2 && pairs.size() == static_cast<std::size_t>(end - begin);
  for (std::size_t i = 1; i < pairs.size() && monotone; ++i) {
    monotone = pairs[i].first == pairs[i - 1].first ? pairs[i].second == pairs[i - 1].second
                                                     : pairs[i].second > pairs[i - 1].second;
  }
  if (monotone && pairs.front().first != pairs.back().first) ++findings->same_code_groups;
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

// The spec as a replay result records it (OutputsReader::recorded_configuration's names).
std::string spec_value(const AllReduceSpec& spec, const std::string& name) {
  const CompensatorSpec& c = spec.compensator;
  if (name == "dtype") return dtype_name(spec.dtype);
  if (name == "algorithm") return algorithm_name(spec.algorithm);
  if (name == "quantizer") return quantizer_name(spec.quant.kind);
  if (name == "bits") return std::to_string(spec.quant.bits);
  if (name == "group") return std::to_string(spec.quant.group);
  if (name == "compensator") return compensator_mode_name(c.mode);
  if (name == "residual") return residual_mode_name(c.residual);
  if (name == "eta") return float_text(c.eta);
  if (name == "a") return float_text(c.a);
  if (name == "beta1") return float_text(c.beta1);
  if (name == "beta2") return float_text(c.beta2);
  if (name == "beta") return float_text(c.beta);
  if (name == "state_dtype") return dtype_name(c.state_dtype);
  if (name == "exact_max_count") return std::to_string(spec.exact_max_count);
  if (name == "outliers") return std::to_string(spec.quant.outliers);
  if (name == "overflow_groups") return overflow_groups_name(spec.quant.overflow);
  if (name == "rotation") return rotation_name(spec.quant.rotation);
  return "";
}

void diagnose_configuration(const OutputsReader& outputs, const AllReduceSpec& spec, VerifyResult* r) {
  std::string differences;
  for (const auto& [name, recorded] : outputs.recorded_configuration()) {
    const std::string used = spec_value(spec, name);
    if (used.empty() || used == recorded) continue;
    differences += (differences.empty() ? "" : ", ") + name + " " + recorded + " (verify: " + used + ")";
  }
  if (differences.empty()) return;
  r->diagnoses.push_back({"spec-options-differ",
                          "the outputs file records a configuration other than verify's spec options: " +
                              differences + "; give verify the options the outputs were made with",
                          "docs/conformance.md, Spec options", false});
}

void diagnose_ranks(const std::vector<std::size_t>& rank_disagreements, const VerifyResult& partial,
                    VerifyResult* r) {
  const int ranks = partial.trace.ranks;
  std::vector<int> odd, clean;
  for (int rank = 0; rank < ranks; ++rank) {
    std::size_t wrong = 0;
    for (std::size_t site = 0; site < partial.trace.sites; ++site) wrong += partial.per_site_rank[site * ranks + rank];
    if (wrong == 0) clean.push_back(rank);
  }
  std::string text;
  for (int rank = 1; rank < ranks; ++rank) {
    if (rank_disagreements[rank] == 0) continue;
    odd.push_back(rank);
    const std::size_t count = rank_disagreements[rank];
    text += (text.empty() ? "" : ", ") + std::string("rank ") + std::to_string(rank) + " differs from rank 0 at " +
            std::to_string(count) + (count == 1 ? " element" : " elements");
  }
  if (odd.empty()) return;
  text = "the ranks' outputs are not the same (every rank must deliver the same bits): " + text;
  if (!clean.empty()) text += "; rank" + std::string(clean.size() > 1 ? "s " : " ") + join_ranks(clean) +
                              " match the reference";
  r->diagnoses.push_back({"ranks-differ", text, "numerics.md 4, steps 3-4 (Gather, Output)", false});
}

void diagnose_groups(const GroupFindings& g, const VerifyResult& partial, VerifyResult* r) {
  if (g.groups == 0) return;
  if (g.same_code_groups == g.groups) {
    r->diagnoses.push_back(
        {"same-codes", "in each of the " + std::to_string(g.groups) +
                           " differing groups the received values are an order-preserving function of the "
                           "expected ones: the same codes decoded with another scale or zero point",
         "numerics.md 2.2 steps 2-3 (scale rounded up, zero point), 2.3 for the symmetric quantizer", false});
  } else if (g.within_step_elements == partial.differing) {
    r->diagnoses.push_back(
        {"within-one-step", "every differing element is within one quantization step of the expected value: "
                            "the right sums, rounded differently in " + std::to_string(g.groups) +
                                " groups (a scale, zero point or code rounded otherwise)",
         "numerics.md 1 (round_up_fp16), 2.2 steps 2-4, 2.3", false});
  }
}

// Recomputes with every alternative that applies and reports those reproducing the outputs.
Status diagnose_alternatives(const TraceReader& trace, const OutputsReader& outputs, const Words& words,
                             VerifyResult* r) {
  const TraceInfo& info = trace.info();
  const std::size_t values = static_cast<std::size_t>(info.ranks) * info.count;
  std::vector<std::uint32_t> received(values);
  for (const Alternative& alternative : alternatives()) {
    if (!alternative.applies(r->spec, info)) continue;
    if (!alternative.spec_of(r->spec).validate(info.ranks).ok()) continue;
    std::unique_ptr<AllReduceBackend> backend = make_alternative_backend(alternative, r->spec, info.ranks);
    std::size_t mismatches = 0;
    Status s = run_trace(trace, *backend, [&](std::size_t pass, std::size_t site, const float* y) {
      ECHO_TRY(outputs.read_site(pass, site, received.data()));
      for (std::size_t i = 0; i < values; ++i) mismatches += words.canonical(received[i]) != words.of(y[i]);
      return Status::Ok();
    });
    if (!s.ok()) return s;
    if (mismatches == 0) {
      r->diagnoses.push_back({alternative.name,
                              std::string("reproduced bit for bit by the reference with this mistake: ") +
                                  alternative.mistake,
                              alternative.numerics, true});
    }
  }
  return Status::Ok();
}

}  // namespace

Status compute_outputs(const TraceReader& trace, AllReduceBackend& backend, std::vector<float>* outputs) {
  const TraceInfo& info = trace.info();
  const std::size_t site_values = static_cast<std::size_t>(info.ranks) * info.count;
  outputs->assign(info.passes * info.sites * site_values, 0.0f);
  return run_trace(trace, backend, [&](std::size_t pass, std::size_t site, const float* y) {
    std::copy_n(y, site_values, outputs->data() + (pass * info.sites + site) * site_values);
    return Status::Ok();
  });
}

Status verify_outputs(const TraceReader& trace, const std::string& outputs_path, const VerifyOptions& options,
                      VerifyResult* result) {
  VerifyResult r;
  r.trace = trace.info();
  const TraceInfo& info = r.trace;
  r.spec = options.spec;
  r.spec.dtype = options.dtype_override.value_or(info.dtype);
  r.spec.direction = info.direction;
  ECHO_TRY(r.spec.validate(info.ranks));
  ECHO_TRY(check_trace_sites(info, trace.path(), r.spec));

  OutputsReader outputs;
  ECHO_TRY(outputs.open(outputs_path, info, r.spec.dtype));
  r.outputs_type = outputs.type_description();
  r.word_bits = outputs.encoding() == OutputsEncoding::kFloat32 ? 32 : 16;
  const Words words{outputs.encoding(), r.spec.dtype};

  const std::size_t ranks = static_cast<std::size_t>(info.ranks);
  const std::size_t n = info.count;
  const std::size_t g = static_cast<std::size_t>(r.spec.quant.group);
  const bool quantized = n > r.spec.exact_max_count;
  r.per_site_rank.assign(info.sites * ranks, 0);
  r.per_pass.assign(info.passes, 0);
  std::vector<std::size_t> rank_disagreements(ranks, 0);
  std::vector<std::uint32_t> received(ranks * n);
  std::vector<float> received_values(ranks * n);
  GroupFindings groups;

  std::unique_ptr<AllReduceBackend> reference = make_cpu_backend(r.spec, info.ranks);
  Status s = run_trace(trace, *reference, [&](std::size_t pass, std::size_t site, const float* y) {
    ECHO_TRY(outputs.read_site(pass, site, received.data()));
    for (std::size_t i = 0; i < ranks * n; ++i) {
      const std::uint32_t canonical = words.canonical(received[i]);
      r.noncanonical_nans += canonical != received[i];
      received[i] = canonical;
      received_values[i] = words.value(canonical);
    }
    for (std::size_t rank = 0; rank < ranks; ++rank) {
      const std::uint32_t* got = received.data() + rank * n;
      const std::uint32_t* rank0 = received.data();
      const float* want = y + rank * n;
      std::size_t differing_here = 0;
      for (std::size_t e = 0; e < n; ++e) {
        rank_disagreements[rank] += got[e] != rank0[e];
        const std::uint32_t expected = words.of(want[e]);
        if (got[e] == expected) continue;
        ++differing_here;
        if (r.first.size() < options.max_listed) {
          OutputDifference d;
          d.pass = pass;
          d.site = site;
          d.rank = static_cast<int>(rank);
          d.element = e;
          d.group = e / g;
          d.expected_word = expected;
          d.received_word = got[e];
          d.expected = want[e];
          d.received = received_values[rank * n + e];
          r.first.push_back(d);
        }
      }
      if (differing_here == 0) continue;
      r.differing += differing_here;
      r.per_site_rank[site * ranks + rank] += differing_here;
      r.per_pass[pass] += differing_here;
      if (!quantized) continue;
      for (std::size_t begin = 0; begin < n; begin += g) {
        const std::size_t end = std::min(n, begin + g);
        bool any = false;
        for (std::size_t e = begin; e < end && !any; ++e) any = got[e] != words.of(want[e]);
        if (any) inspect_group(want, received_values.data() + rank * n, begin, end, r.spec.quant.max_code(), &groups);
      }
    }
    r.compared += ranks * n;
    return Status::Ok();
  });
  if (!s.ok()) return s;

  if (!r.identical()) {
    diagnose_configuration(outputs, r.spec, &r);
    diagnose_ranks(rank_disagreements, r, &r);
    if (options.diagnose) {
      ECHO_TRY(diagnose_alternatives(trace, outputs, words, &r));
    }
    // The group checks describe a difference no alternative explains and ranks agree on.
    const bool named = std::any_of(r.diagnoses.begin(), r.diagnoses.end(), [](const Diagnosis& d) {
      return d.reproduced || d.name == "ranks-differ";
    });
    if (!named) diagnose_groups(groups, r, &r);
  }
  *result = std::move(r);
  return Status::Ok();
}

}  // namespace echo
