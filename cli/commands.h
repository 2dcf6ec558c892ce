// Subcommands of echotk. Each cmd_<name>.cpp registers one subcommand on the app; its callback
// reports failure through fail(), which prints "echotk <name>: error: ..." and sets the exit code.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "echo/status.h"
#include "echo/trace.h"

namespace echo::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;   // the run itself failed (device, internal)
inline constexpr int kExitBadInput = 2;  // bad arguments or input files

// Prints the message to stderr and ends the subcommand with the given exit code.
[[noreturn]] void fail(const std::string& command, int exit_code, const std::string& message);
// Exit code for a library status: kExitBadInput for input/format/argument errors, else kExitFailure.
int exit_code_for(const Status& status);
// fail() with the status's message unless it is ok.
void check(const std::string& command, const Status& status);
// fail() with exit 2 when `output` names the same file as `input` (the rename that completes an
// atomic write would replace the input with the result).
void refuse_output_over_input(const std::string& command, const std::string& input, const std::string& output,
                              const std::string& output_flag);
// fail() with exit 2 unless `output` can be written at the end of a run: an existing path must be a
// regular file, and its directory must exist and be writable. Checked before a long run starts.
void check_output_target(const std::string& command, const std::string& output, const std::string& output_flag);
// fail() with exit 2 unless `path` (an input named by `flag`) is an existing regular file.
void check_input_file(const std::string& command, const std::string& path, const std::string& flag);

// Opens a trace named on the command line: read whole in a child process first
// (check_trace_in_child), so that a crash or hang inside HDF5 on a damaged file becomes exit 2
// with a message naming the file, then opened here; fail() with the reason otherwise.
void open_trace(const std::string& command, const std::string& path, TraceReader* reader);

void register_replay(CLI::App& app);
void register_quantize(CLI::App& app);
void register_verify(CLI::App& app);   // sim/ (outputs against the reference, bit for bit)
void register_ppl(CLI::App& app);      // model/ (SmolLM2 perplexity)
void register_capture(CLI::App& app);  // model/ (trace capture)
void register_prove(CLI::App& app);    // proofs_check/
void register_compare(CLI::App& app);  // sim/ (settings side by side on a trace or network)
void register_bench(CLI::App& app);    // bench/ (benchmark against NCCL)
// A subcommand whose implementation is not in this build: --help works, running it explains why.
void register_unavailable(CLI::App& app, const std::string& name, const std::string& description,
                          const std::string& reason);

}  // namespace echo::cli
