// Command-line options that describe an all-reduce (replay, verify, ppl, capture, compare),
// generated from the spec table (echo/spec_fields.h): one option per field, its name, help, type,
// allowed values and default the table's.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "echo/allreduce.h"
#include "echo/status.h"

namespace echo::cli {

struct SpecOptions {
  // What the spec starts from before the file and the options (the table's defaults unless a
  // command says otherwise).
  AllReduceSpec defaults;
  std::string spec_file;  // --spec-file, where the command offers it
  // The text of each option, by field name, and the option (whether it was given).
  std::map<std::string, std::string> text;
  std::map<std::string, const CLI::Option*> options;

  // The spec: `defaults`, then the spec file's fields, then the options given on the command line.
  // kInvalidArgument (or the file's error) naming the file and key; the caller validates the whole
  // spec (AllReduceSpec::validate). `dtype_from_file` (may be null) says whether the file set dtype.
  Status to_spec(AllReduceSpec* spec, bool* dtype_from_file = nullptr) const;
};

// Adds the option of every field that has one (`only`: just these fields) to the command.
void add_spec_options(CLI::App* command, SpecOptions* options, const std::vector<std::string>& only = {});
// Adds --spec-file: a JSON object of spec fields (echotk.Spec.to_json()), read before the options.
void add_spec_file_option(CLI::App* command, SpecOptions* options);

// Reads a spec file into `spec`: every key must be a field name, every value of the field's type
// and allowed. Errors name the file and the key.
Status read_spec_file(const std::string& path, AllReduceSpec* spec, bool* has_dtype);

}  // namespace echo::cli
