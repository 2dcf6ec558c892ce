// echotk compare: compensator settings side by side (off, single, dual; global and local
// residual; gains) for every quantizer, on a recorded trace or on a synthetic pre-norm network.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <Eigen/Core>

#include "commands.h"
#include "spec_options.h"
#include "echo/text_output.h"
#include "echo/synthetic/network_run.h"
#include "echo/synthetic/study.h"

namespace echo::cli {
namespace {

struct CompareArgs {
  std::string trace;
  bool synthetic = false;
  std::size_t depth = 56;
  std::size_t width = 64;
  std::size_t tokens = 8;
  std::size_t ranks = 4;
  std::size_t passes = 2;
  bool mlp_only = false;
  std::uint64_t seed = 1;
  std::vector<float> gains = {0.5f, 0.625f, 0.75f, 0.875f, 1.0f};
  std::vector<std::string> quantizers = {"zero-aware", "naive", "symmetric"};
  SpecOptions spec;  // bits, group, state dtype and the transport options; the rest is swept
  std::string json;
  std::string emit_trace;
};

std::string num(double v) {
  if (std::isnan(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

void print_rows(const std::vector<synthetic::StudyRow>& rows, bool network) {
  std::printf("%-11s %-20s %10s %10s %12s %10s %12s %10s %12s\n", "quantizer", "setting", "q", "mean|d|",
              "max||S_t||", "/q", "Eq.21/q", "||S_N-1||", network ? "E_N/(dsN^2)" : "max S/|z|");
  for (const auto& r : rows) {
    std::printf("%-11s %-20s %10s %10s %12s %10s %12s %10s %12s", r.quantizer.c_str(), r.setting.c_str(),
                num(r.q).c_str(), num(r.mean_injected).c_str(), num(r.max_partial_sum).c_str(),
                num(r.q > 0 ? r.max_partial_sum / r.q : NAN).c_str(), num(r.q > 0 ? r.bound / r.q : NAN).c_str(),
                num(r.final_partial_sum).c_str(), num(r.deviation).c_str());
    if (network) std::printf("  mean over depths %s", num(r.mean_deviation).c_str());
    std::printf("\n");
  }
}

void write_json(const std::string& path, const std::string& source, const std::vector<synthetic::StudyRow>& rows,
                const std::vector<std::pair<std::string, std::vector<double>>>& curves) {
  std::ostringstream f;
  auto jn = [](double v) { return std::isfinite(v) ? num(v) : std::string("null"); };
  f << "{\n  \"format\": \"echo-compare\",\n  \"source\": " << json_string(source) << ",\n  \"rows\": [\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    f << "    {\"quantizer\": " << json_string(r.quantizer) << ", \"setting\": " << json_string(r.setting) << ", \"q\": " << jn(r.q)
      << ", \"mean_injected\": " << jn(r.mean_injected) << ", \"max_partial_sum\": " << jn(r.max_partial_sum)
      << ", \"final_partial_sum\": " << jn(r.final_partial_sum) << ", \"bound\": " << jn(r.bound)
      << ", \"deviation\": " << jn(r.deviation) << ", \"mean_deviation\": " << jn(r.mean_deviation) << "}"
      << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  f << "  ],\n  \"deviation_vs_depth\": {";
  for (std::size_t i = 0; i < curves.size(); ++i) {
    f << (i ? ",\n" : "\n") << "    " << json_string(curves[i].first) << ": [";
    for (std::size_t k = 0; k < curves[i].second.size(); ++k) f << (k ? ", " : "") << jn(curves[i].second[k]);
    f << "]";
  }
  f << "\n  }\n}\n";
  check("compare", write_text_file_atomically(path, f.str()));
}

void run_compare(const CompareArgs& args) {
  const std::string name = "compare";
  if (args.trace.empty() == !args.synthetic) {
    fail(name, kExitBadInput, "give either a TRACE or --synthetic");
  }
  Eigen::setNbThreads(1);  // small dense products: threads cost more than they gain
  AllReduceSpec base;
  check(name, args.spec.to_spec(&base));
  base.dtype = DType::kFloat32;
  CompensatorSpec coefficients;
  coefficients.state_dtype = base.compensator.state_dtype;
  const std::vector<synthetic::CompensatorSetting> grid = synthetic::compensator_grid(args.gains, coefficients);
  std::vector<synthetic::StudyRow> rows;
  std::vector<std::pair<std::string, std::vector<double>>> curves;
  std::string source;
  if (args.synthetic) {
    synthetic::PreNormConfig cfg;
    cfg.depth = args.depth;
    cfg.width = args.width;
    cfg.tokens = args.tokens;
    cfg.ranks = args.ranks;
    cfg.attention = !args.mlp_only;
    cfg.seed = args.seed;
    const synthetic::PreNormNetwork net(cfg);
    source = "synthetic pre-norm network depth " + std::to_string(args.depth) + " width " +
             std::to_string(args.width) + " tokens " + std::to_string(args.tokens) + " P " + std::to_string(args.ranks);
    std::printf("%s, %zu inputs, %d-bit, group %d, fp32 all-reduce, %s compensator state\n", source.c_str(),
                args.passes, base.quant.bits, base.quant.group, dtype_name(coefficients.state_dtype));
    if (!args.emit_trace.empty()) {
      check(name, synthetic::write_network_trace(net, DType::kFloat32, args.passes, args.emit_trace));
      std::printf("trace written: %s\n", args.emit_trace.c_str());
    }
    for (const std::string& qz : args.quantizers) {
      base.quant.kind = *parse_quantizer(qz);
      check(name, synthetic::study_network(net, base, grid, args.passes, &rows));
    }
    // E_k vs depth for the headline settings (first quantizer).
    base.quant.kind = *parse_quantizer(args.quantizers.front());
    for (const auto& s : grid) {
      if (s.label != "off" && s.label.find("dual/") != 0) continue;
      AllReduceSpec spec = base;
      spec.compensator = s.spec;
      synthetic::NetworkRun run;
      check(name, synthetic::run_network(net, spec, args.passes, &run));
      curves.emplace_back(s.label, run.deviation);
    }
  } else {
    refuse_output_over_input(name, args.trace, args.json, "--json");
    TraceReader trace;
    open_trace(name, args.trace, &trace);
    const TraceInfo& t = trace.info();
    source = args.trace;
    std::printf("trace %s: %zu passes x %zu sites, P = %d, n = %zu, %s; %d-bit, group %d, %s compensator state\n",
                args.trace.c_str(), t.passes, t.sites, t.ranks, t.count, dtype_name(t.dtype), base.quant.bits, base.quant.group,
                dtype_name(coefficients.state_dtype));
    for (const std::string& qz : args.quantizers) {
      base.quant.kind = *parse_quantizer(qz);
      check(name, synthetic::study_trace(trace, base, grid, &rows));
    }
  }
  print_rows(rows, args.synthetic);
  if (!args.json.empty()) write_json(args.json, source, rows, curves);
}

}  // namespace

void register_compare(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* cmd = app.add_subcommand(
      "compare", "Compensator settings (off/single/dual, global/local, gains) side by side for every quantizer");
  cmd->add_option("trace", args->trace, "input trace (HDF5); or use --synthetic");
  cmd->add_flag("--synthetic", args->synthetic, "use a synthetic pre-norm network instead of a trace");
  cmd->add_option("--depth", args->depth, "synthetic: number of sites N")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--width", args->width, "synthetic: model width d per token")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--tokens", args->tokens, "synthetic: tokens per input")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--ranks", args->ranks, "synthetic: P partial contributions per site")->check(CLI::Range(1, kMaxRanks))->capture_default_str();
  cmd->add_option("--passes", args->passes, "synthetic: inputs (passes) averaged")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_flag("--mlp-only", args->mlp_only, "synthetic: MLP blocks only (default: alternate attention / MLP)");
  cmd->add_option("--seed", args->seed, "synthetic: weight and input seed")->capture_default_str();
  cmd->add_option("--gains", args->gains, "compensator gains eta to compare")->delimiter(',')->capture_default_str();
  cmd->add_option("--quantizers", args->quantizers, "quantizers to compare")
      ->delimiter(',')
      ->check(CLI::IsMember({"zero-aware", "naive", "symmetric"}))
      ->capture_default_str();
  add_spec_options(cmd, &args->spec, {"bits", "group", "state_dtype", "outliers", "overflow_groups", "rotation"});
  cmd->add_option("--json", args->json, "also write the rows (and E_k vs depth) as JSON");
  cmd->add_option("--emit-trace", args->emit_trace, "synthetic: also write the exact run as an echo trace");
  cmd->callback([args] { run_compare(*args); });
}

}  // namespace echo::cli
