// The benchmark's power monitor (echotk bench) reads every GPU through NVML where the driver has
// it: limited-time counters that never go back, and a settle under the full power limit that ends
// in time on idle GPUs.
#include <boost/test/unit_test.hpp>

#include <numeric>
#include <vector>

#include "device_group.h"
#include "echo/bench/power_monitor.h"

namespace {

using namespace echo;

}  // namespace

BOOST_AUTO_TEST_SUITE(power_monitor)

BOOST_AUTO_TEST_CASE(power_monitor_reads_every_gpu) {
  if (!test::gpu_present()) return;
  std::vector<int> devices(cuda::device_count());
  std::iota(devices.begin(), devices.end(), 0);
  bench::PowerMonitor power(devices);
  if (!power.available()) {
    BOOST_TEST_MESSAGE("power monitor unavailable: " << power.why());
    BOOST_TEST(!power.why().empty());
    return;
  }
  std::vector<unsigned long long> before, after;
  BOOST_TEST_REQUIRE(power.limited_ns(&before).ok());
  BOOST_TEST(before.size() == devices.size());
  bool settled = false;
  double waited = -1;
  const Status s = power.settle(1.0, 5.0, &settled, &waited);
  BOOST_TEST_REQUIRE(s.ok(), s.message());
  BOOST_TEST(settled);
  BOOST_TEST(waited >= 0.0);
  BOOST_TEST(waited <= 5.5);
  BOOST_TEST_REQUIRE(power.limited_ns(&after).ok());
  BOOST_TEST_REQUIRE(after.size() == before.size());
  for (std::size_t g = 0; g < after.size(); ++g) BOOST_TEST(after[g] >= before[g], "GPU " << g);
}

BOOST_AUTO_TEST_SUITE_END()
