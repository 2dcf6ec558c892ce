// echotk prove: every claim of the paper as a named, falsifiable check (proofs_check/).
#include <iostream>

#include "commands.h"
#include "echo/proofs/check.h"
#include "echo/proofs/report.h"
#include "echo/trace.h"

namespace echo::cli {
namespace {

struct ProveArgs {
  std::string json;
  std::vector<std::string> traces;
  std::string source_dir = ".";
};

void run_prove(const ProveArgs& args) {
  // A trace named on the command line must open (exit 2 with the reader's reason otherwise); the
  // default traces are skipped when absent. Data that cannot be read or is not finite fails its
  // checks (trace_checks.cpp).
  for (const std::string& t : args.traces) {
    TraceReader reader;
    open_trace("prove", t, &reader);
  }
  proofs::ProveOptions options;
  options.traces = args.traces;
  options.source_dir = args.source_dir;
  const std::vector<proofs::CheckResult> results = proofs::run_all_checks(options);
  proofs::print_table(std::cout, results);
  std::cout.flush();
  if (!args.json.empty()) check("prove", proofs::write_json(args.json, results, proofs::series_registry()));
  const std::size_t failures = proofs::count_failures(results);
  if (failures > 0) fail("prove", kExitFailure, std::to_string(failures) + " check(s) failed");
}

}  // namespace

void register_prove(CLI::App& app) {
  auto args = std::make_shared<ProveArgs>();
  CLI::App* cmd = app.add_subcommand(
      "prove", "Run every claim of the paper as a named, falsifiable check; exit 1 on any FAIL");
  cmd->add_option("--json", args->json, "also write the checks and their curves as JSON (for notebooks/)");
  cmd->add_option("--trace", args->traces,
                  "trace(s) for the source-level checks (default: data/examples/synthetic_p4.h5 and "
                  "every echo trace under data/smollm2/ and data/gemma3/)");
  cmd->add_option("--source-dir", args->source_dir, "repository root the default trace paths are relative to")
      ->capture_default_str();
  cmd->callback([args] { run_prove(*args); });
}

}  // namespace echo::cli
