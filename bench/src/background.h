// Background peer-to-peer load (--background-duty, paper Table 3): every GPU copies to the next
// one for `duty` of the time. Buffers, streams and each copy's calibration are set up, and checked,
// before start() returns; a copy that fails later ends its loop, and stop() reports it (the rows
// timed meanwhile ran without the load).
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cuda_resources.h"

namespace echo::bench {

class Background {
 public:
  Background() = default;
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  ~Background() { halt(); }

  // Nothing to do below two GPUs or at duty 0.
  Status start(const std::vector<int>& devs, double duty);
  // Ends the copy loops; the first error one of them hit, if any.
  Status stop();

 private:
  static constexpr std::size_t kBytes = 64 << 20;
  struct Lane {
    int src = 0, dst = 0;
    DeviceBuffer a, b;  // a on src, b on dst
    Stream s;           // on src
    double idle_us = 0;
  };

  void loop(const Lane& l);
  void record(const std::string& message);
  void halt();

  std::atomic<bool> stop_{false};
  std::vector<Lane> lanes_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::string error_;
};

}  // namespace echo::bench
