#include "cuda_backend.h"

#include "echo/cuda/host_group.h"

namespace echo::cli {
namespace {

class CudaBackend final : public AllReduceBackend {
 public:
  explicit CudaBackend(std::unique_ptr<cuda::HostGroup> group) : group_(std::move(group)) {}
  const char* name() const override { return "cuda"; }
  void start_pass() override { group_->reset_compensator(); }
  Status run(std::size_t count, const float* const* inputs, float* const* outputs,
             float* const* compensated, AllReduceReport* report, const SiteInfo* /*site*/) override {
    // can_implement refuses every spec whose calls need their site (compensator units 'stream').
    return group_->allreduce(count, inputs, outputs, compensated, report);
  }

 private:
  std::unique_ptr<cuda::HostGroup> group_;
};

}  // namespace

Status make_cuda_backend(const AllReduceSpec& spec, int ranks,
                         std::unique_ptr<AllReduceBackend>* backend) {
  if (cuda::device_count() == 0) {
    return Status(StatusCode::kUnsupported, "--backend cuda: no CUDA device is visible");
  }
  std::unique_ptr<cuda::HostGroup> group;
  ECHO_TRY(cuda::HostGroup::create(ranks, spec, &group));
  *backend = std::make_unique<CudaBackend>(std::move(group));
  return Status::Ok();
}

}  // namespace echo::cli
