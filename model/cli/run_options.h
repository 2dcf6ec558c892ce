// Command-line options shared by `echotk ppl` and `echotk capture`: the model file, the
// tensor-parallel layout, which all-reduce the sites use, threads, and a progress bar. The
// all-reduce's own knobs (--bits, --quantizer, ...) come from cli/spec_options.h.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "echo/model/llama.h"
#include "echo/model/tensor_parallel.h"
#include "echo/status.h"

namespace echo::model {

struct RunOptions {
  std::string model_path;
  int ranks = 4;
  std::string reduce = "exact";
  std::string dtype = "bf16";
  int threads = 0;
  std::vector<int> eight_bit_sites;  // --eight-bit-sites
};

// $ECHO_MODEL_GGUF, else ${ECHO_CACHE_DIR:-$HOME/.cache/echo}/smollm2/<file> (scripts/setup_model.sh).
std::string default_model_path();

// Adds --model, --ranks, --allreduce, --dtype, --threads and --eight-bit-sites.
void add_run_options(CLI::App* command, RunOptions* options);

// Builds and validates the spec from the options and the all-reduce's parameters (used when
// --allreduce is echo); the status names the offending option.
Status make_tensor_parallel_spec(const RunOptions& options, const AllReduceSpec& allreduce,
                                 TensorParallelSpec* spec);

// Applies --threads to OpenMP and Eigen (0 keeps the OpenMP default); returns the count in use.
int apply_threads(int threads);

// Loads the model of `options`, tokenizes the text file into `ids` and plans `count` evenly spaced
// windows of `length` tokens (their first token indices in `starts`). Failures are input errors whose message names the file or the option
// (`count_option`, e.g. "--windows"); a model that cannot be read points to scripts/setup_model.sh.
Status load_model_and_windows(const RunOptions& options, const std::string& text_path, int count,
                              int length, const std::string& count_option, LlamaModel* llama,
                              std::vector<std::int32_t>* ids, std::vector<std::size_t>* starts);

// One line naming the all-reduce, e.g. "P=4 echo 4-bit zero-aware g=128 dual(global, eta=0.75)".
std::string describe(const TensorParallelSpec& spec);

// A progress bar on stderr, redrawn in place: "label [#####.....] 3/8 windows  812 tok/s".
class ProgressBar {
 public:
  ProgressBar(std::string label, std::size_t total, std::string unit);
  void update(std::size_t done, std::size_t tokens);
  void finish();

 private:
  std::string label_;
  std::size_t total_;
  std::string unit_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace echo::model
