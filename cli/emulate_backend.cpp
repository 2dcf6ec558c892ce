// The one-GPU emulation (echo/cuda/emulate.h) as a replay backend: the P ranks' contributions on
// the current GPU, each call's site passed through (compensator units 'stream', with the post-norm's
// weights copied to the device for profile 'sqrt'), the one output delivered to every rank.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "cuda_backend.h"
#include "echo/cuda/emulate.h"
#include "echo/dtype.h"

namespace echo::cli {
namespace {

Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  (void)cudaGetLastError();
  return Status(StatusCode::kDeviceError, std::string("--backend emulate: ") + what + ": " + cudaGetErrorString(e));
}

// Device memory that grows to the largest size asked for and is freed with its owner.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(ptr_); }
  // At least `bytes` bytes (contents not kept when it grows).
  Status reserve(std::size_t bytes) {
    if (bytes <= bytes_) return Status::Ok();
    cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
    ECHO_TRY(cuda_status(cudaMalloc(&ptr_, bytes), "cudaMalloc"));
    bytes_ = bytes;
    return Status::Ok();
  }
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

class EmulateBackend final : public AllReduceBackend {
 public:
  EmulateBackend(const AllReduceSpec& spec, int ranks, cudaStream_t stream)
      : spec_(spec), ranks_(ranks), stream_(stream) {}
  ~EmulateBackend() override { cudaStreamDestroy(stream_); }
  const char* name() const override { return "emulate"; }
  void start_pass() override {
    fresh_ = true;
    pass_ratios_ = 0;
  }

  Status run(std::size_t count, const float* const* inputs, float* const* outputs, float* const* compensated,
             AllReduceReport* report, const SiteInfo* site) override {
    const std::size_t es = dtype_size(spec_.dtype);
    const auto P = static_cast<std::size_t>(ranks_);
    cuda::EmulateArguments a;
    a.spec = spec_;
    a.ranks = ranks_;
    a.count = count;
    if (count != count_) fresh_ = true;  // a state serves one message size
    count_ = count;
    ECHO_TRY(parts_.reserve(P * count * es));
    ECHO_TRY(out_.reserve(count * es));
    ECHO_TRY(workspace_.reserve(cuda::emulate_workspace_bytes()));
    a.parts = parts_.get();
    a.out = out_.get();
    a.workspace = workspace_.get();
    a.state_bytes = cuda::emulate_state_bytes(spec_, ranks_, count);
    if (a.state_bytes != 0) {
      ECHO_TRY(state_.reserve(a.state_bytes));
      a.state = state_.get();
    }
    if (compensated != nullptr) {
      ECHO_TRY(compensated_.reserve(P * count * 4));
      a.compensated = static_cast<float*>(compensated_.get());
    }
    if (site != nullptr) {
      a.site = *site;
      const std::size_t gains = cuda::emulate_gains_bytes(spec_, ranks_, count, *site);
      if (gains != 0) {
        ECHO_TRY(gains_.reserve(gains));
        a.gains = gains_.get();
        a.gains_bytes = gains;
      }
      const std::size_t ratios = cuda::emulate_ratios_bytes(spec_, ranks_, count, *site);
      if (ratios != 0) {
        // Kept from call to call of a pass (gains 'sum'): one ratio per rank, kind and row.
        if (!fresh_ && pass_ratios_ != 0 && ratios != pass_ratios_) {
          return Status(StatusCode::kInvalidArgument,
                        "compensator gains 'sum': this site's rows differ from the earlier sites' of the pass (the "
                        "row ratios are kept per row)");
        }
        ECHO_TRY(ratios_.reserve(ratios));
        pass_ratios_ = ratios;
        a.ratios = ratios_.get();
        a.ratios_bytes = ratios;
      }
      if (site->has_post_norm && !site->weights.empty()) {
        ECHO_TRY(weights_.reserve(site->weights.size() * 4));
        ECHO_TRY(cuda_status(cudaMemcpyAsync(weights_.get(), site->weights.data(), site->weights.size() * 4,
                                             cudaMemcpyHostToDevice, stream_),
                             "weights upload"));
        a.weights = static_cast<const float*>(weights_.get());
      }
    }
    ECHO_TRY(cuda::emulate_can_implement(a));

    host_.resize(P * count * es);
    for (std::size_t r = 0; r < P; ++r) encode_dtype(inputs[r], count, spec_.dtype, host_.data() + r * count * es);
    ECHO_TRY(cuda_status(cudaMemcpyAsync(parts_.get(), host_.data(), host_.size(), cudaMemcpyHostToDevice, stream_),
                         "inputs upload"));
    if (fresh_ && a.state != nullptr) ECHO_TRY(cuda::emulate_reset_state(a.state, a.state_bytes, stream_));
    fresh_ = false;
    ECHO_TRY(cuda::emulate_allreduce(a, stream_));
    AllReduceReport rep;
    ECHO_TRY(cuda::emulate_read_report(a.workspace, stream_, &rep));  // waits for the stream
    if (report != nullptr) *report = rep;

    ECHO_TRY(cuda_status(cudaMemcpy(host_.data(), a.out, count * es, cudaMemcpyDeviceToHost), "output download"));
    decode_dtype(host_.data(), count, spec_.dtype, outputs[0]);
    for (std::size_t r = 1; r < P; ++r) std::copy(outputs[0], outputs[0] + count, outputs[r]);
    if (compensated != nullptr) {
      for (std::size_t r = 0; r < P; ++r) {
        ECHO_TRY(cuda_status(cudaMemcpy(compensated[r], a.compensated + r * count, count * 4, cudaMemcpyDeviceToHost),
                             "x' download"));
      }
    }
    return Status::Ok();
  }

 private:
  AllReduceSpec spec_;
  int ranks_;
  cudaStream_t stream_;
  bool fresh_ = true;
  std::size_t count_ = 0;
  std::size_t pass_ratios_ = 0;  // gains 'sum': the row ratios' bytes of this pass's post-norm sites
  DeviceBuffer parts_, out_, workspace_, state_, compensated_, gains_, weights_, ratios_;
  std::vector<unsigned char> host_;
};

}  // namespace

Status make_emulate_backend(const AllReduceSpec& spec, int ranks, std::unique_ptr<AllReduceBackend>* backend) {
  // The CUDA runtime alone (an echotk built without the peer-to-peer kernels has no HostGroup).
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    return Status(StatusCode::kUnsupported, "--backend emulate: no CUDA device is visible");
  }
  cudaStream_t stream = nullptr;
  ECHO_TRY(cuda_status(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  *backend = std::make_unique<EmulateBackend>(spec, ranks, stream);
  return Status::Ok();
}

}  // namespace echo::cli
