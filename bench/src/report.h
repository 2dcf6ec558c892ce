// How a run is written: the table's lines on the terminal and in --markdown, the CSV's lines
// (columns in data/bench/README.md), and the appending of both to their files.
#pragma once

#include <string>

#include "echo/bench/harness.h"
#include "verification.h"

namespace echo::bench {

// The table's header (markdown) and the CSV's (nccl-tests' columns, then #differ, the row's
// speedup and error).
inline constexpr char kTableHeader[] =
    "| row | size (B) | count | type | time (us) | algbw (GB/s) | busbw (GB/s) | #wrong | #differ | speedup | rel. error |";
inline constexpr char kTableRule[] = "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|";
inline constexpr char kCsvHeader[] =
    "row,ranks,mode,size,count,type,time,algbw,busbw,#wrong,#differ,ratio_vs_nccl,rel_error\n";

// One row at one size as measured.
struct RowResult {
  std::string row;
  std::size_t bytes = 0;
  double ms = 0;
  double nccl_ms = 0;  // nccl-bf16 at the same size; 0 when it did not run before this row
  bool verified = false;
  Verification v;
};

std::string fmt(double v, int precision);

// How the run times its calls, the CSV's mode column.
std::string run_mode(const Options& opt);

std::string table_line(const RowResult& r, int ranks);
std::string csv_line(const RowResult& r, int ranks, const std::string& mode);

// kInvalidArgument when `path` exists, is not empty and starts with another header than
// kCsvHeader (a file of an earlier version, whose #wrong meant what #differ means now).
Status check_csv_columns(const std::string& path);

// Appends `text` to the file at `path` through a temporary file beside it and a rename, so that a
// failure leaves the file as it was; `header` starts a file that is new or empty.
Status append_text(const std::string& path, const std::string& text, const std::string& header = "");

}  // namespace echo::bench
