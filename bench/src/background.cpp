#include "background.h"

#include "echo/bench/device_ops.h"

namespace echo::bench {

Status Background::start(const std::vector<int>& devs, double duty) {
  if (duty <= 0.0 || devs.size() < 2) return Status::Ok();
  lanes_.resize(devs.size());
  for (std::size_t g = 0; g < devs.size(); ++g) {
    Lane& l = lanes_[g];
    l.src = devs[g];
    l.dst = devs[(g + 1) % devs.size()];
    ECHO_TRY(l.b.allocate(l.dst, kBytes, "background"));
    ECHO_TRY(l.a.allocate(l.src, kBytes, "background"));
    ECHO_TRY(l.s.create(l.src, "background"));
    Event e0, e1;
    ECHO_TRY(e0.create("background"));
    ECHO_TRY(e1.create("background"));
    ECHO_BENCH_CUDA(cudaEventRecord(e0.get(), l.s.get()), "background: cudaEventRecord");
    ECHO_BENCH_CUDA(cudaMemcpyPeerAsync(l.b.get(), l.dst, l.a.get(), l.src, kBytes, l.s.get()),
                    "background: cudaMemcpyPeerAsync");
    ECHO_BENCH_CUDA(cudaEventRecord(e1.get(), l.s.get()), "background: cudaEventRecord");
    ECHO_BENCH_CUDA(cudaEventSynchronize(e1.get()), "background: calibration copy");
    float ms = 0;
    ECHO_BENCH_CUDA(cudaEventElapsedTime(&ms, e0.get(), e1.get()), "background: cudaEventElapsedTime");
    l.idle_us = ms * 1e3 * (1.0 - duty) / duty;
  }
  stop_ = false;
  for (Lane& l : lanes_) threads_.emplace_back([this, &l] { loop(l); });
  return Status::Ok();
}

Status Background::stop() {
  halt();
  if (!error_.empty()) return Status(StatusCode::kDeviceError, error_);
  return Status::Ok();
}

void Background::loop(const Lane& l) {
  cudaError_t e = cudaSetDevice(l.src);
  std::string what = "cudaSetDevice";
  while (e == cudaSuccess && !stop_) {
    for (int k = 0; k < 4 && e == cudaSuccess; ++k) {
      e = cudaMemcpyPeerAsync(l.b.get(), l.dst, l.a.get(), l.src, kBytes, l.s.get());
      what = "cudaMemcpyPeerAsync";
      if (e == cudaSuccess && l.idle_us > 1.0) {
        const Status st = spin(l.idle_us, l.s.get());
        if (!st.ok()) {
          record("background: GPU " + std::to_string(l.src) + ": idle kernel: " + st.message());
          return;
        }
      }
    }
    if (e == cudaSuccess) {
      e = cudaStreamSynchronize(l.s.get());
      what = "copy";
    }
  }
  if (e != cudaSuccess) {
    record("background: GPU " + std::to_string(l.src) + " -> " + std::to_string(l.dst) + ": " + what + ": " +
           cudaGetErrorString(e));
  }
}

void Background::record(const std::string& message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_.empty()) error_ = message;
}

// Joins the loops and frees the lanes (streams synchronize before they go).
void Background::halt() {
  stop_ = true;
  for (auto& t : threads_) t.join();
  threads_.clear();
  lanes_.clear();
}

}  // namespace echo::bench
