// echo_prove: runs every check of the paper's claims, prints the table, exits 1 on any FAIL.
#include <iostream>

#include <CLI/CLI.hpp>

#include "echo/proofs/check.h"
#include "echo/proofs/report.h"

int main(int argc, char** argv) {
  CLI::App app{"echo_prove: every claim of the Echo paper as a named, falsifiable check"};
  echo::proofs::ProveOptions options;
  std::string json;
  app.add_option("--json", json, "also write the table and the curves as JSON");
  app.add_option("--trace", options.traces, "trace(s) for the source-level checks (default: bundled example, data/smollm2/*.h5 and data/gemma3/*.h5)");
  app.add_option("--source-dir", options.source_dir, "repository root for the default trace paths")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const auto results = echo::proofs::run_all_checks(options);
  echo::proofs::print_table(std::cout, results);
  if (!json.empty()) {
    const echo::Status s = echo::proofs::write_json(json, results, echo::proofs::series_registry());
    if (!s.ok()) {
      std::cerr << "echo_prove: error: " << s.message() << "\n";
      return 2;
    }
  }
  return echo::proofs::count_failures(results) == 0 ? 0 : 1;
}
