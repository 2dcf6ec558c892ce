// Command-line options that describe an all-reduce (shared by replay, ppl, capture and bench).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "echo/allreduce.h"

namespace echo::cli {

struct SpecOptions {
  int bits = 4;
  int group = kDefaultGroup;
  std::string quantizer = "zero-aware";
  std::string compensator = "dual";
  std::string residual = "global";
  std::string algorithm = "owner";
  float eta = 0.75f;
  float a = 0.35f;
  float beta1 = 0.7f;
  float beta2 = 0.3f;
  float beta = 0.4f;
  std::size_t exact_max_count = 0;
  std::string state_dtype = "fp32";
  int outliers = 0;
  std::string overflow_groups = "wide";
  std::string rotation = "none";

  // Builds the spec; the caller validates it (AllReduceSpec::validate).
  AllReduceSpec to_spec() const;
};

// Adds --bits, --group, --quantizer, --compensator, --residual, --algorithm, --eta, --a, --beta1,
// --beta2, --beta, --state-dtype, --exact-max-count and the transport options to the subcommand.
void add_spec_options(CLI::App* command, SpecOptions* options);

// The transport options of issue 25 (docs/numerics.md 2.4-2.6), by themselves: --outliers,
// --overflow-groups, --rotation.
struct TransportOptions {
  int* outliers;
  std::string* overflow_groups;
  std::string* rotation;
};
void add_transport_options(CLI::App* command, const TransportOptions& options);
// Sets the quantizer spec's transport fields from the option values (already checked by CLI11).
void apply_transport_options(int outliers, const std::string& overflow_groups, const std::string& rotation,
                             QuantSpec* quant);
// Adds --state-dtype alone (echotk compare, whose other options sweep a grid).
void add_state_dtype_option(CLI::App* command, std::string* state_dtype);

}  // namespace echo::cli
