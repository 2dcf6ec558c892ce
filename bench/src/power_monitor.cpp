// PowerMonitor over NVML, loaded with dlopen so that the build needs only nvml.h and the programs
// run where the driver has no NVML (the monitor is then unavailable). Built without nvml.h
// (ECHO_HAVE_NVML undefined), every monitor is unavailable.
#include "echo/bench/power_monitor.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <thread>

#ifdef ECHO_HAVE_NVML
#include <dlfcn.h>
#include <nvml.h>
#endif

namespace echo::bench {

#ifdef ECHO_HAVE_NVML

namespace {

// Clock-event reasons that mean the power or thermal limits hold the clocks down.
constexpr unsigned long long kLimitReasons = nvmlClocksEventReasonSwPowerCap | nvmlClocksThrottleReasonHwSlowdown |
                                             nvmlClocksEventReasonSwThermalSlowdown |
                                             nvmlClocksThrottleReasonHwThermalSlowdown |
                                             nvmlClocksThrottleReasonHwPowerBrakeSlowdown;

// NVML's cumulative limited-time counters (ns), read with nvmlDeviceGetFieldValues.
constexpr unsigned int kLimitCounters[] = {NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP,
                                           NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN,
                                           NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN,
                                           NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN};

}  // namespace

struct PowerMonitor::Impl {
  void* library = nullptr;
  decltype(&nvmlInit_v2) init = nullptr;
  decltype(&nvmlShutdown) shutdown = nullptr;
  decltype(&nvmlErrorString) error_string = nullptr;
  decltype(&nvmlDeviceGetHandleByPciBusId_v2) handle_by_pci = nullptr;
  decltype(&nvmlDeviceGetPowerUsage) power_usage = nullptr;
  decltype(&nvmlDeviceGetEnforcedPowerLimit) power_limit = nullptr;
  decltype(&nvmlDeviceGetCurrentClocksEventReasons) event_reasons = nullptr;
  decltype(&nvmlDeviceGetFieldValues) field_values = nullptr;
  bool initialized = false;
  std::vector<nvmlDevice_t> devices;
  std::string why;

  template <typename F>
  bool resolve(F* f, const char* name, const char* fallback = nullptr) {
    void* p = dlsym(library, name);
    if (p == nullptr && fallback != nullptr) p = dlsym(library, fallback);
    if (p == nullptr) why = std::string("libnvidia-ml.so.1 has no ") + name;
    *f = reinterpret_cast<F>(p);
    return p != nullptr;
  }
  Status nvml_error(nvmlReturn_t r, const char* what) const {
    return Status(StatusCode::kDeviceError, std::string("NVML ") + what + ": " + error_string(r));
  }
};

PowerMonitor::PowerMonitor(const std::vector<int>& cuda_devices) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (m.library == nullptr) {
    m.why = "libnvidia-ml.so.1 not loaded (" + std::string(dlerror()) + ")";
    return;
  }
  if (!m.resolve(&m.init, "nvmlInit_v2") || !m.resolve(&m.shutdown, "nvmlShutdown") ||
      !m.resolve(&m.error_string, "nvmlErrorString") ||
      !m.resolve(&m.handle_by_pci, "nvmlDeviceGetHandleByPciBusId_v2") ||
      !m.resolve(&m.power_usage, "nvmlDeviceGetPowerUsage") ||
      !m.resolve(&m.power_limit, "nvmlDeviceGetEnforcedPowerLimit") ||
      !m.resolve(&m.event_reasons, "nvmlDeviceGetCurrentClocksEventReasons",
                 "nvmlDeviceGetCurrentClocksThrottleReasons") ||
      !m.resolve(&m.field_values, "nvmlDeviceGetFieldValues")) {
    return;
  }
  const nvmlReturn_t r = m.init();
  if (r != NVML_SUCCESS) {
    m.why = std::string("nvmlInit: ") + m.error_string(r);
    return;
  }
  m.initialized = true;
  for (int d : cuda_devices) {
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), d) != cudaSuccess) {
      m.why = "no PCI bus id for CUDA device " + std::to_string(d);
      m.devices.clear();
      return;
    }
    nvmlDevice_t h{};
    const nvmlReturn_t e = m.handle_by_pci(bus, &h);
    if (e != NVML_SUCCESS) {
      m.why = std::string("NVML has no device at ") + bus + ": " + m.error_string(e);
      m.devices.clear();
      return;
    }
    m.devices.push_back(h);
  }
}

PowerMonitor::~PowerMonitor() {
  if (impl_->initialized) impl_->shutdown();
  if (impl_->library != nullptr) dlclose(impl_->library);
}

bool PowerMonitor::available() const { return !impl_->devices.empty(); }
const std::string& PowerMonitor::why() const { return impl_->why; }

Status PowerMonitor::settle(double fraction, double max_seconds, bool* settled, double* waited_s) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  *settled = !available();
  *waited_s = 0;
  while (!*settled) {
    bool all = true;
    for (nvmlDevice_t d : impl_->devices) {
      unsigned int mw = 0, limit_mw = 0;
      unsigned long long reasons = 0;
      nvmlReturn_t r = impl_->power_usage(d, &mw);
      if (r != NVML_SUCCESS) return impl_->nvml_error(r, "power usage");
      r = impl_->power_limit(d, &limit_mw);
      if (r != NVML_SUCCESS) return impl_->nvml_error(r, "power limit");
      r = impl_->event_reasons(d, &reasons);
      if (r != NVML_SUCCESS) return impl_->nvml_error(r, "clock event reasons");
      if (mw > fraction * limit_mw || (reasons & kLimitReasons) != 0) all = false;
    }
    *waited_s = elapsed();
    *settled = all;
    if (all || *waited_s >= max_seconds) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::Ok();
}

Status PowerMonitor::limited_ns(std::vector<unsigned long long>* ns) {
  ns->assign(impl_->devices.size(), 0);
  for (std::size_t i = 0; i < impl_->devices.size(); ++i) {
    nvmlFieldValue_t v[sizeof(kLimitCounters) / sizeof(kLimitCounters[0])] = {};
    const int n = static_cast<int>(sizeof(kLimitCounters) / sizeof(kLimitCounters[0]));
    for (int k = 0; k < n; ++k) v[k].fieldId = kLimitCounters[k];
    const nvmlReturn_t r = impl_->field_values(impl_->devices[i], n, v);
    if (r != NVML_SUCCESS) return impl_->nvml_error(r, "limited-time counters");
    for (int k = 0; k < n; ++k) {
      if (v[k].nvmlReturn == NVML_SUCCESS) (*ns)[i] += v[k].value.ullVal;
    }
  }
  return Status::Ok();
}

#else  // built without nvml.h

struct PowerMonitor::Impl {
  std::string why = "built without nvml.h (scripts/fetch_nvml_header.sh)";
};

PowerMonitor::PowerMonitor(const std::vector<int>&) : impl_(std::make_unique<Impl>()) {}
PowerMonitor::~PowerMonitor() = default;
bool PowerMonitor::available() const { return false; }
const std::string& PowerMonitor::why() const { return impl_->why; }
Status PowerMonitor::settle(double, double, bool* settled, double* waited_s) {
  *settled = true;
  *waited_s = 0;
  return Status::Ok();
}
Status PowerMonitor::limited_ns(std::vector<unsigned long long>* ns) {
  ns->clear();
  return Status::Ok();
}

#endif

}  // namespace echo::bench
