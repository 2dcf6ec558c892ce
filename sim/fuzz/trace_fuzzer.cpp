// libFuzzer target: arbitrary bytes as an HDF5 trace, through the path echotk takes. The file is
// read whole in a child process first (check_trace_in_child); where that ends with a Status, the
// same bytes are opened here from a memory image and every read path runs in this process
// (header, attributes, every site, find_nonfinite for each dtype, hidden states, read_all). Any
// crash, hang, sanitizer report or leak here is a bug; a child that HDF5 crashed or hung is the
// outcome expected of some damaged files, and only counted.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "echo/trace.h"
#include "echo/trace_check.h"

namespace {

// Bounds the work per input so the fuzzer explores the format rather than reading huge datasets.
constexpr std::size_t kMaxValuesRead = 1 << 18;
constexpr echo::DType kDTypes[] = {echo::DType::kFloat32, echo::DType::kBFloat16, echo::DType::kFloat16};

std::string scratch_path() {
  return "/tmp/echo-trace-fuzz-" + std::to_string(static_cast<long>(getpid())) + ".h5";
}

bool isolated_check_ended_cleanly(const std::uint8_t* data, std::size_t size) {
  const std::string path = scratch_path();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  echo::TraceCheckLimits limits;
  limits.open_seconds = 3.0;
  const echo::Status status = echo::check_trace_in_child(path, limits);
  std::remove(path.c_str());
  // The child's own crashes and time-outs are reported as damaged files naming these words.
  const std::string& m = status.message();
  return m.find("HDF5 crashed") == std::string::npos && m.find("did not finish within") == std::string::npos &&
         m.find("ended without a result") == std::string::npos;
}

}  // namespace

// Full allocation stacks (HDF5 is built without frame pointers), so that the one leak suppressed
// below is matched by its place: HDF5 1.10 leaks a few bytes of object header when H5Fopen fails
// on a damaged root group (H5G_mkroot), inside the library and once per failed open.
extern "C" const char* __asan_default_options() { return "fast_unwind_on_malloc=0"; }
extern "C" const char* __lsan_default_suppressions() { return "leak:H5G_mkroot\n"; }

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!isolated_check_ended_cleanly(data, size)) return 0;
  echo::TraceReader reader;
  if (!reader.open_image(data, size, "fuzz.h5").ok()) return 0;
  const echo::TraceInfo& info = reader.info();
  const std::size_t per_site = static_cast<std::size_t>(info.ranks) * info.count;
  if (per_site > kMaxValuesRead) return 0;
  std::vector<float> site(per_site);
  std::size_t budget = kMaxValuesRead;
  for (std::size_t pass = 0; pass < info.passes && budget >= per_site; ++pass) {
    for (std::size_t k = 0; k < info.sites && budget >= per_site; ++k, budget -= per_site) {
      if (!reader.read_site(pass, k, site.data()).ok()) return 0;
      for (echo::DType dtype : kDTypes) (void)reader.find_nonfinite(pass, k, site.data(), dtype);
    }
  }
  if (info.has_hidden_states && (info.sites + 1) * info.count <= kMaxValuesRead) {
    std::vector<float> hidden((info.sites + 1) * info.count);
    (void)reader.read_hidden_states(0, hidden.data());
  }
  if (info.passes * per_site <= kMaxValuesRead) (void)reader.read_all();
  return 0;
}
