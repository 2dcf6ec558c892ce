// The all-reduce benchmark behind `echotk bench`: the Echo all-reduce against NCCL on the GPUs
// present (one rank per GPU, one host thread each), in nccl-tests columns (size, count, type,
// time, algbw, busbw, #wrong) plus #differ, the speedup over NCCL bf16 at the same size and the
// relative error against the exact fp64 sum. docs/bench.md says what each row times;
// data/bench/README.md names the CSV's columns.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "echo/cuda/tuning.h"
#include "echo/status.h"

namespace echo::bench {

struct Options {
  int ranks = 0;  // 0: every GPU, at most kMaxRanks
  std::size_t min_bytes = 64 << 10;
  std::size_t max_bytes = std::size_t{1} << 30;
  int factor = 2;
  int iters = 50;
  int warmup = 10;
  std::vector<std::string> rows;  // empty: every row
  double duty = 0.0;              // background peer-to-peer copy duty
  int mm_m = 0, mm_n = 8192, mm_k = 8192;  // mm_m 0: rows follow the message (matmul_rows)
  std::string markdown;
  std::string csv;
  int tiles_per_wave = 0;
  double tiles_per_sqrt = 0.0;
  int reduce_lag_waves = 0, tail_lag_waves = 0;
  std::size_t slot_mib = 0;
  long long exact_max = -1;  // the Echo rows' exact-path limit; -1: the library default
  std::size_t split_tail_min = cuda::kDefaultSplitTailMinCount;
  bool skip_verify = false;
  int graph = 0;                // calls per CUDA graph (0: one launch per call)
  double settle_below = 0.5;    // a row starts once every GPU draws at most this share of its power limit
  double settle_max_s = 10.0;   // ... or after this many seconds
};

// Most rows of the overlapped matmul when they follow the message (--matmul-m 0): 8192 keeps it
// at about 1.4 ms on an H200, below the clock drops that a longer one brings on.
inline constexpr int kMatmulMaxRows = 8192;

// The rows' names, in the order they run.
std::vector<std::string> row_names();

// The largest message, in elements, whose #wrong is checked against the CPU reference: the
// reference computes P ranks' two calls of 4 Mi elements in a few seconds. Larger sizes show n/a.
inline constexpr std::size_t kReferenceMaxCount = std::size_t{1} << 22;

// Refuses (kInvalidArgument, naming the option) what can be refused without a GPU: sizes, the
// rows asked for, a --csv file whose columns are not this version's. Output paths are the
// caller's to check.
Status check_options(const Options& options);

// Runs the benchmark: the table on `out` as it goes, then --markdown and --csv appended.
Status run(const Options& options, std::ostream& out);

}  // namespace echo::bench
