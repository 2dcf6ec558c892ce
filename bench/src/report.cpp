#include "report.h"

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <sstream>

#include "echo/status.h"
#include "echo/text_output.h"

namespace echo::bench {

std::string fmt(double v, int precision) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(precision) << v;
  return o.str();
}

std::string run_mode(const Options& opt) {
  if (opt.graph > 0) return opt.duty > 0 ? "graph+background" : "graph";
  return opt.duty > 0 ? "background" : "plain";
}

namespace {

double algbw(const RowResult& r) { return r.bytes / (r.ms * 1e-3) / 1e9; }
double busbw(const RowResult& r, int ranks) { return algbw(r) * 2.0 * (ranks - 1) / ranks; }

// The #wrong cell: `skipped` without verification, n/a where no reference was computed.
std::string wrong_cell(const RowResult& r, const std::string& skipped) {
  if (!r.verified) return skipped;
  return r.v.wrong ? std::to_string(*r.v.wrong) : "n/a";
}

}  // namespace

std::string table_line(const RowResult& r, int ranks) {
  std::ostringstream line;
  line << "| " << r.row << " | " << r.bytes << " | " << r.bytes / 2 << " | bf16 | " << fmt(r.ms * 1e3, 1) << " | "
       << fmt(algbw(r), 1) << " | " << fmt(busbw(r, ranks), 1) << " | " << wrong_cell(r, "-") << " | "
       << (r.verified ? std::to_string(r.v.differ) : std::string("-")) << " | "
       << (r.nccl_ms > 0 ? fmt(r.nccl_ms / r.ms, 2) + "x" : std::string("-")) << " | "
       << (r.verified ? fmt(r.v.rel_error, 6) : std::string("-")) << " |";
  return line.str();
}

std::string csv_line(const RowResult& r, int ranks, const std::string& mode) {
  std::ostringstream line;
  line << r.row << "," << ranks << "," << mode << "," << r.bytes << "," << r.bytes / 2 << ",bf16," << fmt(r.ms * 1e3, 1)
       << "," << fmt(algbw(r), 1) << "," << fmt(busbw(r, ranks), 1) << "," << wrong_cell(r, "") << ","
       << (r.verified ? std::to_string(r.v.differ) : std::string()) << ","
       << (r.nccl_ms > 0 ? fmt(r.nccl_ms / r.ms, 2) : std::string()) << ","
       << (r.verified ? fmt(r.v.rel_error, 6) : std::string()) << "\n";
  return line.str();
}

namespace {

Status read_file(const std::string& path, std::string* text) {
  text->clear();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Status::Ok();
  std::ifstream in(path, std::ios::binary);
  text->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) return Status(StatusCode::kIoError, "cannot read " + path);
  return Status::Ok();
}

}  // namespace

Status check_csv_columns(const std::string& path) {
  std::string text;
  ECHO_TRY(read_file(path, &text));
  if (text.empty()) return Status::Ok();
  const std::string header = kCsvHeader;
  if (text.compare(0, header.size(), header) != 0) {
    return Status(StatusCode::kInvalidArgument,
                  "--csv " + path + ": its columns are not this version's (" + header.substr(0, header.size() - 1) +
                      "; #wrong now counts mismatches against the CPU reference): name a new file");
  }
  return Status::Ok();
}

Status append_text(const std::string& path, const std::string& text, const std::string& header) {
  std::string before;
  ECHO_TRY(read_file(path, &before));
  return write_text_file_atomically(path, (before.empty() ? header : before) + text);
}

}  // namespace echo::bench
