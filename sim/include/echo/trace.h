// Reader and writer of recorded activation traces (HDF5, docs/trace-format.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "echo/allreduce.h"
#include "echo/dtype.h"
#include "echo/site.h"
#include "echo/status.h"

namespace echo {

inline constexpr const char* kTraceFormatName = "echo-trace";
inline constexpr int kTraceFormatVersion = 1;
// Deflate's largest ratio of data to compressed bytes (about 1032:1): a file cannot hold more
// float32 data than this many times its size, so datasets declaring more are refused at open.
inline constexpr std::uint64_t kMaxCompressionRatio = 1032;
// Bytes that replaying one contribution element holds at once (the float32 input, outputs, the
// compensator's state and the float64 error rows, with room to spare): the per-site memory bound.
inline constexpr std::uint64_t kReplayBytesPerContribution = 64;
// ... and per site of a pass (the float64 norms and kernel rows replay and its metrics keep).
inline constexpr std::uint64_t kReplayBytesPerSite = 64;

// The memory one trace's working set may take: half of the machine's physical memory.
std::uint64_t trace_memory_budget();

struct TraceInfo {
  int ranks = 0;
  Direction direction = Direction::kForward;
  DType dtype = DType::kFloat32;
  std::size_t passes = 0;
  std::size_t sites = 0;
  std::size_t count = 0;  // elements per contribution (n)
  bool has_hidden_states = false;
  std::vector<std::int8_t> site_kind;  // empty when absent
  std::optional<std::int64_t> tokens;
  std::optional<std::int64_t> hidden;
  std::string model;
  std::string source;
  // The attribute post_norm: "none" (pre-norm sites), "rmsnorm" (post_norm_weights holds each site's
  // norm's effective weights, [sites * hidden]), or absent (not recorded).
  std::optional<std::string> post_norm;
  std::vector<float> post_norm_weights;
};

// Each site's SiteInfo (docs/numerics.md 6.1) from the trace's post_norm record, with its kind from
// /site_kind where recorded; empty where the trace does not record post_norm.
std::vector<SiteInfo> trace_sites(const TraceInfo& info);
// kInvalidArgument naming `path` where calls of `spec` need their site (needs_site) and the trace
// does not record post_norm, or with gains 'sum' post-norm sites and not /site_kind; Ok otherwise.
Status check_trace_sites(const TraceInfo& info, const std::string& path, const AllReduceSpec& spec);

class TraceReader {
 public:
  TraceReader();
  ~TraceReader();
  TraceReader(TraceReader&&) noexcept;
  TraceReader& operator=(TraceReader&&) noexcept;

  // Opens and validates the file's attributes and dataset shapes; messages name the file and field
  // and print bytes from the file escaped. Shapes that need more bytes than the file can hold
  // (kMaxCompressionRatio) or more memory per site than trace_memory_budget() are refused.
  // HDF5 itself may still crash or hang on a malformed file: check_trace_in_child
  // (trace_check.h) first, where the file is not trusted.
  Status open(const std::string& path);
  // The same from an HDF5 file image in memory (copied); `name` stands for the path in messages.
  Status open_image(const void* data, std::size_t size, const std::string& name);
  const TraceInfo& info() const { return info_; }
  const std::string& path() const { return path_; }

  // contributions of one site: out[rank * count + i], float32.
  Status read_site(std::size_t pass, std::size_t site, float* out) const;
  // kNonFiniteInput naming the file, pass, site, rank and index of the first of those contributions
  // that is not finite or becomes so rounded to `dtype`; Ok when there is none.
  Status find_nonfinite(std::size_t pass, std::size_t site, const float* contributions, DType dtype) const;
  // hidden states of one pass: out[(sites + 1) * count].
  Status read_hidden_states(std::size_t pass, float* out) const;
  // Reads every site of every pass and every pass's hidden states, keeping nothing: the whole
  // file goes through the same reads a replay makes.
  Status read_all() const;

 private:
  struct Impl;
  Status read_header(std::unique_ptr<Impl> impl, std::uint64_t file_bytes);
  std::unique_ptr<Impl> impl_;
  TraceInfo info_;
  std::string path_;
};

// Writes a trace to PATH.tmp-<pid> and renames it to PATH on commit(); a writer destroyed
// without commit() removes the temporary file.
class TraceWriter {
 public:
  TraceWriter();
  ~TraceWriter();
  TraceWriter(TraceWriter&&) noexcept;
  TraceWriter& operator=(TraceWriter&&) noexcept;

  // info.passes, sites, count, ranks fix the dataset shapes; compression level 0..9 (gzip).
  Status create(const std::string& path, const TraceInfo& info, int compression = 4);
  // contributions of one site: in[rank * count + i].
  Status write_site(std::size_t pass, std::size_t site, const float* in);
  // hidden states of one pass: in[(sites + 1) * count]; requires info.has_hidden_states.
  Status write_hidden_states(std::size_t pass, const float* in);
  Status commit();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace echo
