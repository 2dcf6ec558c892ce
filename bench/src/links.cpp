#include "links.h"

#include <chrono>
#include <string>
#include <vector>

#include "echo/bench/device_ops.h"
#include "report.h"

namespace echo::bench {
namespace {

constexpr std::size_t kLinkBytes = 256 << 20;

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Copy engines: GPU 0 to GPU 1 alone, or every GPU to all its peers at once; *seconds of the last
// of three passes.
Status copies_timed(const Context& c, const std::vector<DeviceBuffer>& src, const std::vector<DeviceBuffer>& dst,
                    bool all, double* seconds) {
  std::vector<std::vector<Stream>> s(c.P);
  for (int r = 0; r < c.P; ++r) {
    s[r].resize(c.P);
    for (auto& x : s[r]) ECHO_TRY(x.create(c.devs[r], "link test"));
  }
  for (int rep = 0; rep < 3; ++rep) {
    ECHO_TRY(synchronize_all(c, "link test"));
    const auto t0 = Clock::now();
    for (int r = 0; r < (all ? c.P : 1); ++r) {
      ECHO_BENCH_CUDA(cudaSetDevice(c.devs[r]), "link test: cudaSetDevice");
      for (int q = 0; q < (all ? c.P : 2); ++q) {
        if (q == r) continue;
        ECHO_BENCH_CUDA(cudaMemcpyPeerAsync(dst[q * c.P + r].get(), c.devs[q], src[r].get(), c.devs[r], kLinkBytes,
                                            s[r][q].get()),
                        "link test: cudaMemcpyPeerAsync");
      }
    }
    ECHO_TRY(synchronize_all(c, "link test: peer copies"));
    *seconds = seconds_since(t0);
  }
  return Status::Ok();
}

// SM-driven: every GPU's kernel stores into (loads from) all its peers at once.
Status sm_timed(const Context& c, const std::vector<DeviceBuffer>& src, const std::vector<DeviceBuffer>& dst,
                bool store, double* seconds) {
  for (int rep = 0; rep < 3; ++rep) {
    ECHO_TRY(synchronize_all(c, "link test"));
    const auto t0 = Clock::now();
    for (int r = 0; r < c.P; ++r) {
      ECHO_BENCH_CUDA(cudaSetDevice(c.devs[r]), "link test: cudaSetDevice");
      std::vector<void*> peers;
      for (int q = 0; q < c.P; ++q) {
        if (q != r) peers.push_back(dst[q * c.P + r].get());  // lives on q
      }
      const int n = static_cast<int>(peers.size());
      ECHO_TRY(store ? peer_store(peers.data(), n, kLinkBytes, nullptr)
                           : peer_load(peers.data(), n, kLinkBytes, src[r].get(), nullptr));
    }
    ECHO_TRY(synchronize_all(c, store ? "link test: peer stores" : "link test: peer loads"));
    *seconds = seconds_since(t0);
  }
  return Status::Ok();
}

}  // namespace

Status measure_links(const Context& c, std::ostream& out) {
  if (c.P < 2) return Status::Ok();
  std::vector<DeviceBuffer> src(c.P), dst(c.P * c.P);
  for (int r = 0; r < c.P; ++r) {
    ECHO_TRY(src[r].allocate(c.devs[r], kLinkBytes, "link test"));
    for (int q = 0; q < c.P; ++q) {
      if (q != r) ECHO_TRY(dst[r * c.P + q].allocate(c.devs[r], kLinkBytes, "link test"));  // on r, written by q
    }
  }
  double one = 0, all = 0, st = 0, ld = 0;
  ECHO_TRY(copies_timed(c, src, dst, false, &one));
  ECHO_TRY(copies_timed(c, src, dst, true, &all));
  ECHO_TRY(sm_timed(c, src, dst, true, &st));
  ECHO_TRY(sm_timed(c, src, dst, false, &ld));
  const double peers_bytes = static_cast<double>(kLinkBytes) * (c.P - 1);
  out << "# SM-driven, every GPU with all " << (c.P - 1) << " peers at once: stores " << fmt(peers_bytes / st / 1e9, 1)
      << " GB/s egress per GPU, loads " << fmt(peers_bytes / ld / 1e9, 1) << " GB/s ingress per GPU\n";
  out << "# peer copy bandwidth: one copy " << fmt(kLinkBytes / one / 1e9, 1) << " GB/s; every GPU to all "
      << (c.P - 1) << " peers at once " << fmt(peers_bytes / all / 1e9, 1) << " GB/s egress per GPU\n";
  return Status::Ok();
}

}  // namespace echo::bench
