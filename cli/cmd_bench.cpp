// echotk bench: the command-line front of the benchmark harness in bench/
// (echo/bench/harness.h: rows, columns and how each row is timed and verified). Flags map one to
// one onto bench::Options.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "echo/allreduce.h"
#include "echo/bench/harness.h"

namespace echo::cli {
namespace {

const char* kCmd = "bench";

}  // namespace

void register_bench(CLI::App& app) {
  auto opt = std::make_shared<bench::Options>();
  CLI::App* sub = app.add_subcommand(kCmd, "Echo all-reduce against NCCL on the GPUs present (nccl-tests columns)");
  sub->add_option("--ranks", opt->ranks, "ranks, one per GPU (default: every GPU, at most 8)")
      ->check(CLI::Range(0, kMaxRanks));
  sub->add_option("-b,--min-bytes", opt->min_bytes, "smallest message in bytes of bf16")->capture_default_str();
  sub->add_option("-e,--max-bytes", opt->max_bytes, "largest message in bytes of bf16")->capture_default_str();
  sub->add_option("-f,--factor", opt->factor, "size multiplier between rows")->capture_default_str()->check(CLI::Range(2, 1024));
  sub->add_option("-n,--iters", opt->iters, "timed iterations per row (median)")->capture_default_str()->check(CLI::Range(1, 100000));
  sub->add_option("-w,--warmup", opt->warmup, "warm-up iterations per row")->capture_default_str();
  const std::vector<std::string> names = bench::row_names();
  sub->add_option("--rows", opt->rows,
                  "rows to run (default: all; the -bf16 rows time the compensated call alone with bf16 "
                  "state, the -bf16-matmul rows with bf16 state as the paper does, matmul + all-reduce minus "
                  "the matmul alone)")
      ->check(CLI::IsMember(names));
  sub->add_option("--background-duty", opt->duty, "fraction of time each GPU copies to the next one (0: off)")
      ->capture_default_str()->check(CLI::Range(0.0, 1.0));
  sub->add_option("--matmul-m", opt->mm_m,
                  "rows of the overlapped bf16 matmul (0: the message's tokens, count / matmul-k, at most 8192)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--matmul-n", opt->mm_n, "columns of the overlapped bf16 matmul")->capture_default_str();
  sub->add_option("--matmul-k", opt->mm_k, "inner size of the overlapped bf16 matmul")->capture_default_str();
  sub->add_option("--markdown", opt->markdown, "append the table (with date, GPU, driver) to this file");
  sub->add_option("--csv", opt->csv,
                  "append the rows as CSV to this file (nccl-tests columns plus row, ranks, mode, #differ, ratio "
                  "against nccl-bf16 and error; the header starts a new file, a file of other columns is refused)");
  sub->add_option("--tiles-per-sqrt-iteration", opt->tiles_per_sqrt,
                  "tiling of the Echo kernels: about this many tiles times the square root of a segment's "
                  "block iterations (0: default, 16 for 4 bits and 24 for 8)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--tiles-per-wave", opt->tiles_per_wave,
                  "tiling of the Echo kernels by tiles per wave of resident jobs instead (0: the square-root rule)");
  sub->add_option("--reduce-lag-waves", opt->reduce_lag_waves,
                  "waves of resident jobs between a tile's push and its reduce (0: default, 3)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--tail-lag-waves", opt->tail_lag_waves,
                  "waves of resident jobs between a tile's reduce and its tail (0: default, 3)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--exact-max-count", opt->exact_max,
                  "the Echo rows' exact-path limit in elements, for rows that do not fix their own "
                  "(echo4-quant, exact, nccl-t*); default: the library's default for P ranks")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--split-tail-min-count", opt->split_tail_min,
                  "messages of at least this many elements run the compensated local-residual kernels in "
                  "their split form, the tail in a kernel of its own (0: at every size)")
      ->capture_default_str();
  sub->add_option("--slot-mib", opt->slot_mib, "receive slot per source in MiB (0: the library's default for P ranks)")
      ->capture_default_str();
  sub->add_flag("--skip-verify", opt->skip_verify, "skip the #wrong, #differ and error columns (faster)");
  sub->add_option("--settle-below", opt->settle_below,
                  "start each row once every GPU draws at most this share of its power limit with no power or "
                  "thermal clock limit active (NVML; a GPU at its limit lowers its clocks, and its power reading "
                  "lags the load); 0: do not wait")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--settle-max-seconds", opt->settle_max_s, "longest wait for that before a row starts anyway")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 600.0));
  sub->add_option("--graph", opt->graph,
                  "time every row from CUDA graphs of this many calls per rank, replayed --iters times, "
                  "instead of one launch per call (0: plain launches; the rows with a matmul are left out)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  sub->callback([opt] {
    // Everything that can be refused without a GPU is refused before the run (bench::run checks
    // the rest first).
    check_output_target(kCmd, opt->markdown, "--markdown");
    check_output_target(kCmd, opt->csv, "--csv");
    check(kCmd, bench::run(*opt, std::cout));
  });
}

}  // namespace echo::cli
