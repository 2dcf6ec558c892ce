// The benchmark's driver: options checked, the GPUs set up, the header and link bandwidths
// printed, then every size and row timed and verified, each row started once the GPUs' power has
// settled; the table and CSV appended to their files at the end.
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <sstream>

#include "background.h"
#include "context.h"
#include "echo/bench/harness.h"
#include "echo/bench/power_monitor.h"
#include "links.h"
#include "report.h"
#include "rows.h"
#include "run_row.h"
#include "verify.h"

namespace echo::bench {
namespace {

// The smallest advance of NVML's clock-limit counters listed under the table: the driver adds the
// limited time to them about every 100 ms, so a smaller advance seen across a short row may belong
// to the row before it (measured on H200: 9-87 ms across rows of 4-15 ms that followed limited ones).
constexpr unsigned long long kLimitedNoteMinNs = 100'000'000;

// The run's first line: date, GPUs, versions and settings.
std::string run_header(const Context& c, const cudaDeviceProp& prop, int driver) {
  const Options& opt = c.opt;
  std::ostringstream head;
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  head << "# echotk bench " << date << ": " << c.P << " x " << prop.name << ", CUDA driver API " << driver / 1000 << "."
       << (driver % 1000) / 10 << ", NCCL " << NCCL_MAJOR << "." << NCCL_MINOR << "." << NCCL_PATCH
       << ", bf16, medians of " << opt.iters << " iterations after " << opt.warmup
       << " warm-up, background peer-to-peer duty " << fmt(opt.duty * 100, 0) << "%, Echo receive slots "
       << ((opt.slot_mib != 0 ? opt.slot_mib << 20 : cuda::default_slot_bytes(c.P)) >> 20) << " MiB"
       << (opt.exact_max >= 0 ? ", exact path up to " + std::to_string(opt.exact_max) + " elements" : std::string())
       << (opt.graph > 0 ? ", per-call times from CUDA graphs of " + std::to_string(opt.graph) +
                               " calls (rows with a matmul left out)"
                         : std::string())
       << "\n";
  return head.str();
}

// Waits for the GPUs' power to settle before a row and watches NVML's clock-limit counters while
// it runs, collecting the notes listed under the table.
class RowWatch {
 public:
  RowWatch(PowerMonitor& power, const Options& opt)
      : power_(power), opt_(opt), settling_(opt.settle_below > 0 && power.available()), counters_(power.available()) {}
  bool settling() const { return settling_; }

  Status before(const std::string& cell) {
    if (settling_) {
      bool settled = false;
      double waited = 0;
      ECHO_TRY(power_.settle(opt_.settle_below, opt_.settle_max_s, &settled, &waited));
      settle_total_s_ += waited;
      if (!settled) notes_.push_back(cell + ": started after " + fmt(waited, 1) + " s with the GPUs not settled");
    }
    if (counters_) {
      const Status st = power_.limited_ns(&limited0_);
      if (!st.ok()) {
        notes_.push_back("clock-limit counters not read: " + st.message());
        counters_ = false;
      }
    }
    t0_ = std::chrono::steady_clock::now();
    return Status::Ok();
  }

  void after(const std::string& cell) {
    const double row_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    std::vector<unsigned long long> limited1;
    if (!counters_ || !power_.limited_ns(&limited1).ok()) return;
    unsigned long long worst = 0;
    for (std::size_t g = 0; g < limited0_.size(); ++g) worst = std::max(worst, limited1[g] - limited0_[g]);
    if (worst >= kLimitedNoteMinNs) {
      notes_.push_back(cell + ": NVML's power and thermal clock-limit counters advanced " + fmt(worst * 1e-6, 0) +
                       " ms while the row ran for " + fmt(row_s * 1e3, 0) + " ms (most limited GPU)");
    }
  }

  std::vector<std::string> notes() const {
    std::vector<std::string> all = notes_;
    if (settling_) {
      all.insert(all.begin(), "waited " + fmt(settle_total_s_, 1) + " s in all for the GPUs' power to settle before rows");
    }
    return all;
  }

 private:
  PowerMonitor& power_;
  const Options& opt_;
  bool settling_;
  bool counters_;
  double settle_total_s_ = 0;
  std::vector<unsigned long long> limited0_;
  std::chrono::steady_clock::time_point t0_;
  std::vector<std::string> notes_;
};

}  // namespace

Status check_options(const Options& opt) {
  if (opt.min_bytes < 2 || opt.min_bytes % 2 != 0 || opt.max_bytes % 2 != 0) {
    return Status(StatusCode::kInvalidArgument,
                  "--min-bytes and --max-bytes must be positive multiples of 2 (bf16 elements)");
  }
  if (opt.max_bytes < opt.min_bytes) return Status(StatusCode::kInvalidArgument, "--max-bytes is below --min-bytes");
  std::vector<RowSpec> rows;
  ECHO_TRY(select_rows(opt, &rows));
  if (!opt.csv.empty()) ECHO_TRY(check_csv_columns(opt.csv));
  return Status::Ok();
}

Status run(const Options& opt, std::ostream& out) {
  ECHO_TRY(check_options(opt));
  std::vector<RowSpec> rows;
  ECHO_TRY(select_rows(opt, &rows));
  int gpus = 0;
  ECHO_BENCH_CUDA(cudaGetDeviceCount(&gpus), "cudaGetDeviceCount");
  if (gpus == 0) return Status(StatusCode::kUnsupported, "no CUDA device");
  const int P = opt.ranks > 0 ? opt.ranks : std::min(gpus, kMaxRanks);
  if (P > gpus) {
    return Status(StatusCode::kInvalidArgument, "bench runs one rank per GPU; --ranks exceeds the GPUs present");
  }
  cudaDeviceProp prop{};
  ECHO_BENCH_CUDA(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  int driver = 0;
  ECHO_BENCH_CUDA(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  Context c;
  ECHO_TRY(open_context(opt, P, &c));
  std::string head = run_header(c, prop, driver);

  PowerMonitor power(c.devs);
  RowWatch watch(power, opt);
  if (watch.settling()) {
    head += "# every row starts once each GPU draws at most " + fmt(opt.settle_below * 100, 0) +
            "% of its power limit with no power or thermal clock limit active (NVML), or after " +
            fmt(opt.settle_max_s, 0) + " s\n";
  } else if (opt.settle_below > 0) {
    head += "# rows start without waiting for the GPUs' power to settle: " + power.why() + "\n";
  }
  out << head;
  ECHO_TRY(measure_links(c, out));
  Background bg;
  ECHO_TRY(bg.start(c.devs, opt.duty));
  const int top_rows = opt.mm_m > 0 ? opt.mm_m : kMatmulMaxRows;
  double matmul_ms = 0;
  ECHO_TRY(time_matmul(c, 3, std::max(10, opt.iters / 2), top_rows, &matmul_ms));
  out << "# matmul "
      << (opt.mm_m > 0 ? std::to_string(opt.mm_m)
                       : "(count / " + std::to_string(opt.mm_k) + ", 1.." + std::to_string(kMatmulMaxRows) + ")")
      << "x" << opt.mm_n << "x" << opt.mm_k << " bf16, alone at " << top_rows << " rows: " << fmt(matmul_ms * 1e3, 1)
      << " us at the start (the compensated rows subtract the matmul alone measured right after each of them)\n";
  std::ostringstream table, csv;
  const std::string mode = run_mode(opt);
  table << kTableHeader << "\n" << kTableRule << "\n";
  out << kTableHeader << std::endl;
  for (std::size_t bytes = opt.min_bytes; bytes <= opt.max_bytes; bytes *= opt.factor) {
    const std::size_t count = bytes / 2;
    ECHO_TRY(prepare_inputs(c, count));
    double nccl_ms = 0;
    for (const RowSpec& row : rows) {
      const std::string cell = row.name + " at " + std::to_string(bytes) + " B";
      ECHO_TRY(watch.before(cell));
      Measured m;
      ECHO_TRY(run_row(c, row, count, &m));
      watch.after(cell);
      if (row.call == RowCall::kNcclAllReduce) nccl_ms = m.ms;
      RowResult result{row.name, bytes, m.ms, nccl_ms, !opt.skip_verify, m.v};
      const std::string line = table_line(result, c.P);
      out << line << std::endl;
      table << line << "\n";
      csv << csv_line(result, c.P, mode);
    }
  }
  ECHO_TRY(bg.stop());
  ECHO_TRY(synchronize_all(c, "end of the run"));
  // On the terminal as comment lines; in the markdown file as a list under the table (a line
  // starting with '#' would be a heading there).
  const std::vector<std::string> notes = watch.notes();
  std::string list = notes.empty() ? "" : "\n";
  for (const std::string& n : notes) {
    out << "# " << n << "\n";
    list += "- " + n + "\n";
  }
  out.flush();
  if (!opt.markdown.empty()) ECHO_TRY(append_text(opt.markdown, "\n" + head + "\n" + table.str() + list));
  if (!opt.csv.empty()) ECHO_TRY(append_text(opt.csv, csv.str(), kCsvHeader));
  return Status::Ok();
}

}  // namespace echo::bench
