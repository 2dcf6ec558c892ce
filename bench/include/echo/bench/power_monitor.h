// Power and clock state of the GPUs a benchmark runs on, read through NVML (the driver's
// libnvidia-ml.so.1, loaded at run time). A GPU held at its power limit lowers its clocks, and it
// stays near the limit for a while after a heavy kernel (its power reading is an average), so a
// measurement that follows a heavy one runs slower than the same measurement alone. `echotk bench`
// therefore starts every timed row once the GPUs have settled, and reports the time their clocks
// spent held down by the power or thermal limits while a row was timed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "echo/status.h"

namespace echo::bench {

class PowerMonitor {
 public:
  // NVML for these CUDA devices. Without it (no driver library, a build without nvml.h, a device
  // NVML does not know) available() is false, why() says why, and the calls below return at once.
  explicit PowerMonitor(const std::vector<int>& cuda_devices);
  ~PowerMonitor();
  PowerMonitor(const PowerMonitor&) = delete;
  PowerMonitor& operator=(const PowerMonitor&) = delete;

  bool available() const;
  const std::string& why() const;

  // Waits until every device draws at most `fraction` of its enforced power limit and reports no
  // power or thermal clock limit, polling every 20 ms for at most `max_seconds`. *settled: whether
  // that happened in time; *waited_s: the seconds waited.
  Status settle(double fraction, double max_seconds, bool* settled, double* waited_s);

  // Per device: the nanoseconds its clocks have been held down by the power cap, thermal slowdown
  // or power brake, from NVML's cumulative counters (a difference around a measurement is the time
  // it was limited; the H200's driver advances them in steps of up to 100 ms, so the difference
  // can exceed a short measurement). Counters the driver does not keep read 0.
  Status limited_ns(std::vector<unsigned long long>* ns);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace echo::bench
