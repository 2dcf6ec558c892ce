#include "echo/backend.h"

#include <vector>

namespace echo {
namespace {

class CpuBackend final : public AllReduceBackend {
 public:
  CpuBackend(const AllReduceSpec& spec, int ranks) : spec_(spec), ranks_(ranks), states_(ranks) {}
  const char* name() const override { return "cpu"; }
  void start_pass() override {
    for (CompensatorState& s : states_) s.reset();
  }
  Status run(std::size_t count, const float* const* inputs, float* const* outputs,
             float* const* compensated, AllReduceReport* report, const SiteInfo* site) override {
    if (site != nullptr) {
      return allreduce_at_site(*site, spec_, ranks_, count, inputs, outputs, states_.data(), compensated, report,
                               &workspace_);
    }
    return allreduce(spec_, ranks_, count, inputs, outputs, states_.data(), compensated, report, &workspace_);
  }

 private:
  AllReduceSpec spec_;
  int ranks_;
  std::vector<CompensatorState> states_;
  AllReduceWorkspace workspace_;
};

}  // namespace

std::unique_ptr<AllReduceBackend> make_cpu_backend(const AllReduceSpec& spec, int ranks) {
  return std::make_unique<CpuBackend>(spec, ranks);
}

}  // namespace echo
