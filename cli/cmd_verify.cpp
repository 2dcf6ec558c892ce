// echotk verify TRACE.h5 OUTPUTS.h5: does an implementation's /outputs match the reference bit for bit?
#include <cinttypes>
#include <cstdio>
#include <sstream>

#include "commands.h"
#include "echo/text_output.h"
#include "echo/verify.h"
#include "spec_options.h"

namespace echo::cli {
namespace {

struct VerifyArgs {
  std::string trace;
  std::string outputs;
  std::string dtype;
  std::size_t max_listed = 10;
  bool json = false;
  bool no_diagnose = false;
  SpecOptions spec;
};

std::string hex(std::uint32_t word, int bits) {
  char text[16];
  std::snprintf(text, sizeof text, bits == 16 ? "0x%04" PRIX32 : "0x%08" PRIX32, word);
  return text;
}

std::string spec_text(const AllReduceSpec& spec) {
  const CompensatorSpec& c = spec.compensator;
  char text[320];
  std::snprintf(text, sizeof text,
                "%s, %d-bit %s, group %d, compensator %s (%s residual, eta %s, a %s, beta1 %s, beta2 %s, beta %s, "
                "%s state), exact_max_count %zu",
                algorithm_name(spec.algorithm), spec.quant.bits, quantizer_name(spec.quant.kind), spec.quant.group,
                compensator_mode_name(c.mode), residual_mode_name(c.residual), float_text(c.eta).c_str(),
                float_text(c.a).c_str(), float_text(c.beta1).c_str(), float_text(c.beta2).c_str(),
                float_text(c.beta).c_str(), dtype_name(c.state_dtype), spec.exact_max_count);
  std::string out = text;
  if (spec.quant.rotation != Rotation::kNone) out += std::string(", rotation ") + rotation_name(spec.quant.rotation);
  if (spec.quant.outliers != 0) out += ", outliers " + std::to_string(spec.quant.outliers);
  if (c.mode != CompensatorMode::kOff && c.units == CompensatorUnits::kStream) {
    out += std::string(", units stream (profile ") + compensator_profile_name(c.profile) + ", clip " +
           float_text(c.clip) + ", gains " + compensator_gains_name(c.gains) + ")";
  }
  return out;
}

void print_text(const VerifyResult& r, const VerifyArgs& args) {
  const TraceInfo& t = r.trace;
  std::printf("trace      %s: %zu passes x %zu sites, P = %d, n = %zu, %s, %s\n", args.trace.c_str(), t.passes,
              t.sites, t.ranks, t.count, dtype_name(r.spec.dtype), direction_name(t.direction));
  std::printf("spec       %s\n", spec_text(r.spec).c_str());
  std::printf("outputs    %s: /outputs %s\n", args.outputs.c_str(), r.outputs_type.c_str());
  if (r.identical()) {
    std::printf("result     IDENTICAL: all %zu outputs match the reference bit for bit\n", r.compared);
  } else {
    std::printf("result     DIFFERENT: %zu of %zu outputs differ from the reference\n", r.differing, r.compared);
    std::printf("\ndiffering elements per site and rank (all passes):\n  site");
    for (int rank = 0; rank < t.ranks; ++rank) std::printf("  rank %-3d", rank);
    std::printf("\n");
    for (std::size_t site = 0; site < t.sites; ++site) {
      std::printf("  %4zu", site);
      for (int rank = 0; rank < t.ranks; ++rank) std::printf("  %8zu", r.per_site_rank[site * t.ranks + rank]);
      std::printf("\n");
    }
    std::printf("differing elements per pass:");
    for (std::size_t p = 0; p < t.passes; ++p) std::printf(" %zu", r.per_pass[p]);
    std::printf("\n\nfirst differences:\n  pass  site  rank  element  group  %-28s %-28s\n", "expected (bits)",
                "received (bits)");
    for (const OutputDifference& d : r.first) {
      char expected[64], received[64];
      std::snprintf(expected, sizeof expected, "%.9g (%s)", d.expected, hex(d.expected_word, r.word_bits).c_str());
      std::snprintf(received, sizeof received, "%.9g (%s)", d.received, hex(d.received_word, r.word_bits).c_str());
      std::printf("  %4zu  %4zu  %4d  %7zu  %5zu  %-28s %-28s\n", d.pass, d.site, d.rank, d.element, d.group, expected,
                  received);
    }
    std::printf("\ndiagnosis:\n");
    if (r.diagnoses.empty()) std::printf("  none of the known mistakes reproduces these outputs\n");
    for (const Diagnosis& d : r.diagnoses) {
      std::printf("  %s: %s\n      read: %s\n", d.name.c_str(), d.text.c_str(), d.numerics.c_str());
    }
  }
  if (r.noncanonical_nans > 0) {
    std::printf("note       %zu received NaNs are not the canonical NaN (docs/numerics.md 1); compared as NaN\n",
                r.noncanonical_nans);
  }
}

void print_json(const VerifyResult& r, const VerifyArgs& args) {
  const TraceInfo& t = r.trace;
  std::ostringstream f;
  f << "{\n  \"format\": \"echo-verify\",\n  \"trace\": " << json_string(args.trace)
    << ",\n  \"outputs\": " << json_string(args.outputs) << ",\n  \"outputs_type\": " << json_string(r.outputs_type)
    << ",\n  \"passes\": " << t.passes << ", \"sites\": " << t.sites << ", \"ranks\": " << t.ranks
    << ", \"n\": " << t.count << ",\n  \"dtype\": " << json_string(dtype_name(r.spec.dtype))
    << ", \"direction\": " << json_string(direction_name(t.direction))
    << ",\n  \"spec\": " << json_string(spec_text(r.spec)) << ",\n  \"identical\": " << (r.identical() ? "true" : "false")
    << ",\n  \"compared\": " << r.compared << ", \"differing\": " << r.differing
    << ", \"noncanonical_nans\": " << r.noncanonical_nans << ",\n  \"differing_per_site_rank\": [";
  for (std::size_t site = 0; site < t.sites; ++site) {
    f << (site ? ", " : "") << "[";
    for (int rank = 0; rank < t.ranks; ++rank) f << (rank ? ", " : "") << r.per_site_rank[site * t.ranks + rank];
    f << "]";
  }
  f << "],\n  \"differing_per_pass\": [";
  for (std::size_t p = 0; p < t.passes; ++p) f << (p ? ", " : "") << r.per_pass[p];
  f << "],\n  \"first_differences\": [";
  for (std::size_t i = 0; i < r.first.size(); ++i) {
    const OutputDifference& d = r.first[i];
    f << (i ? "," : "") << "\n    {\"pass\": " << d.pass << ", \"site\": " << d.site << ", \"rank\": " << d.rank
      << ", \"element\": " << d.element << ", \"group\": " << d.group << ", \"expected\": " << json_number(d.expected)
      << ", \"expected_bits\": " << json_string(hex(d.expected_word, r.word_bits))
      << ", \"received\": " << json_number(d.received)
      << ", \"received_bits\": " << json_string(hex(d.received_word, r.word_bits)) << "}";
  }
  f << "],\n  \"diagnoses\": [";
  for (std::size_t i = 0; i < r.diagnoses.size(); ++i) {
    const Diagnosis& d = r.diagnoses[i];
    f << (i ? "," : "") << "\n    {\"name\": " << json_string(d.name) << ", \"reproduced\": "
      << (d.reproduced ? "true" : "false") << ", \"text\": " << json_string(d.text)
      << ", \"numerics\": " << json_string(d.numerics) << "}";
  }
  f << "]\n}\n";
  std::fputs(f.str().c_str(), stdout);
}

void run_verify(const VerifyArgs& args) {
  const std::string name = "verify";
  check_input_file(name, args.trace, "TRACE");
  check_input_file(name, args.outputs, "OUTPUTS");
  TraceReader trace;
  open_trace(name, args.trace, &trace);
  VerifyOptions options;
  bool dtype_from_file = false;
  check(name, args.spec.to_spec(&options.spec, &dtype_from_file));
  if (dtype_from_file) options.dtype_override = options.spec.dtype;
  if (!args.dtype.empty()) options.dtype_override = parse_dtype(args.dtype);
  options.max_listed = args.max_listed;
  options.diagnose = !args.no_diagnose;
  VerifyResult result;
  check(name, verify_outputs(trace, args.outputs, options, &result));
  if (args.json) {
    print_json(result, args);
  } else {
    print_text(result, args);
  }
  std::fflush(stdout);
  // Differing outputs are the command's answer, not an error: exit 1 without an error message.
  if (!result.identical()) throw CLI::RuntimeError(kExitFailure);
}

}  // namespace

void register_verify(CLI::App& app) {
  auto args = std::make_shared<VerifyArgs>();
  CLI::App* cmd = app.add_subcommand(
      "verify",
      "Check an implementation's outputs against the reference bit for bit (exit 0 identical, 1 different, "
      "2 bad input)");
  cmd->add_option("trace", args->trace, "input trace (HDF5, docs/trace-format.md)")->required();
  cmd->add_option("outputs", args->outputs,
                  "/outputs [passes, sites, ranks, n] to check: float32, or the trace's dtype (docs/conformance.md)")
      ->required();
  cmd->add_option("--dtype", args->dtype,
                  "the type the all-reduce ran in, instead of the trace's: float32 | bfloat16 | float16")
      ->check(CLI::IsMember({"float32", "bfloat16", "float16", "fp32", "bf16", "fp16"}));
  cmd->add_option("--max-listed", args->max_listed, "how many first differences to list")->capture_default_str();
  cmd->add_flag("--json", args->json, "print the result as JSON instead of text");
  cmd->add_flag("--no-diagnose", args->no_diagnose,
                "skip the recomputations with known mistakes that name a difference's cause");
  add_spec_options(cmd, &args->spec);
  add_spec_file_option(cmd, &args->spec);
  cmd->callback([args] { run_verify(*args); });
}

}  // namespace echo::cli
