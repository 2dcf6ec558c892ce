// HostGroup: one process, P ranks over the GPUs present (round-robin), each rank with its own
// stream, buffers and compensator state. Host floats are converted to the dtype's bits on the way
// in and back to floats on the way out; the call itself is the library's allreduce on every rank.
#include "echo/cuda/host_group.h"

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "check.h"
#include "communicator_impl.h"
#include "echo/cuda/communicator.h"
#include "echo/dtype.h"

namespace echo::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

HostGroup::~HostGroup() = default;

namespace {

struct RankBuffers {
  cudaStream_t stream = nullptr;
  void* data = nullptr;       // input, then output (in place) or input only (out of place)
  void* out = nullptr;
  float* compensated = nullptr;
  std::size_t capacity = 0;
  CompensatorBuffers* state = nullptr;
  std::vector<unsigned char> host;
};

class HostGroupImpl final : public HostGroup {
 public:
  HostGroupImpl(int ranks, const AllReduceSpec& spec, std::size_t exact_capacity, std::size_t split_tail_min_count)
      : ranks_(ranks), spec_(spec) {
    if (exact_capacity != 0) options_.exact_capacity = exact_capacity;
    options_.split_tail_min_count = split_tail_min_count;
  }

  ~HostGroupImpl() override {
    // Also after a failed init(): ranks whose communicator was never made own nothing.
    for (int r = 0; r < static_cast<int>(comms_.size()); ++r) {
      if (comms_[r] == nullptr) continue;
      RankBuffers& b = bufs_[r];
      cudaSetDevice(devices_[r]);
      cudaDeviceSynchronize();
      if (b.state) destroy_compensator(b.state);
      cudaFree(b.data);
      cudaFree(b.out);
      cudaFree(b.compensated);
      if (b.stream) cudaStreamDestroy(b.stream);
      destroy(comms_[r]);
    }
  }

  Status init() {
    const int n = device_count();
    if (n == 0) return Status(StatusCode::kUnsupported, "no CUDA device present");
    devices_.resize(ranks_);
    for (int r = 0; r < ranks_; ++r) devices_[r] = r % n;
    comms_.assign(ranks_, nullptr);
    bufs_.resize(ranks_);
    ECHO_TRY(create_group(ranks_, devices_.data(), options_, comms_.data()));
    for (int r = 0; r < ranks_; ++r) {
      ECHO_CUDA_CHECK(cudaSetDevice(devices_[r]));
      ECHO_CUDA_CHECK(cudaStreamCreateWithFlags(&bufs_[r].stream, cudaStreamNonBlocking));
    }
    return Status::Ok();
  }

  Status ensure_capacity(std::size_t count) {
    for (int r = 0; r < ranks_; ++r) {
      RankBuffers& b = bufs_[r];
      if (b.capacity >= count) continue;
      ECHO_CUDA_CHECK(cudaSetDevice(devices_[r]));
      ECHO_CUDA_CHECK(cudaDeviceSynchronize());
      cudaFree(b.data);
      cudaFree(b.out);
      cudaFree(b.compensated);
      ECHO_CUDA_CHECK(cudaMalloc(&b.data, count * 4));
      ECHO_CUDA_CHECK(cudaMalloc(&b.out, count * 4));
      ECHO_CUDA_CHECK(cudaMalloc(&b.compensated, count * 4));
      b.capacity = count;
    }
    return Status::Ok();
  }

  Status ensure_state(int r, std::size_t count) {
    RankBuffers& b = bufs_[r];
    if (b.state != nullptr && b.state->capacity >= count) return Status::Ok();
    if (b.state != nullptr && state_count_ != 0) {
      return Status(StatusCode::kInvalidArgument,
                    "compensator state of rank " + std::to_string(r) + " holds " +
                        std::to_string(state_count_) + " elements but the message has " +
                        std::to_string(count) + " (reset the state between passes of different size)");
    }
    if (b.state != nullptr) ECHO_TRY(destroy_compensator(b.state));
    b.state = nullptr;
    return create_compensator(comms_[r], count, &b.state);
  }

  Status allreduce(std::size_t count, const float* const* inputs, float* const* outputs,
                   float* const* compensated, AllReduceReport* report) override {
    if (count == 0) return Status(StatusCode::kInvalidArgument, "element count must be >= 1");
    if (inputs == nullptr || outputs == nullptr) {
      return Status(StatusCode::kInvalidArgument, "inputs and outputs must not be null");
    }
    const bool compensate = spec_.compensator.mode != CompensatorMode::kOff;
    if (compensate && state_count_ != 0 && state_count_ != count) {
      return Status(StatusCode::kInvalidArgument,
                    "compensator state of rank 0 holds " + std::to_string(state_count_) +
                        " elements but the message has " + std::to_string(count) +
                        " (reset the state between passes of different size)");
    }
    ECHO_TRY(ensure_capacity(count));
    const std::size_t esize = dtype_size(spec_.dtype);
    for (int r = 0; r < ranks_; ++r) {
      RankBuffers& b = bufs_[r];
      ECHO_CUDA_CHECK(cudaSetDevice(devices_[r]));
      if (compensate) ECHO_TRY(ensure_state(r, count));
      b.host.resize(count * esize);
      encode_dtype(inputs[r], count, spec_.dtype, b.host.data());
      ECHO_CUDA_CHECK(cudaMemcpyAsync(b.data, b.host.data(), count * esize, cudaMemcpyHostToDevice, b.stream));
    }
    // Every rank's call is enqueued before any is waited for: the kernels meet through flags.
    for (int r = 0; r < ranks_; ++r) {
      RankBuffers& b = bufs_[r];
      float* comp_out = compensated != nullptr && compensated[r] != nullptr ? b.compensated : nullptr;
      ECHO_TRY(echo::cuda::allreduce(comms_[r], b.data, b.out, count, spec_,
                                                 compensate ? b.state : nullptr, b.stream, comp_out));
    }
    AllReduceReport total;
    for (int r = 0; r < ranks_; ++r) {
      RankBuffers& b = bufs_[r];
      AllReduceReport rep;
      ECHO_TRY(synchronize(comms_[r], &rep));
      total.poisoned_groups += rep.poisoned_groups;
      if (r == 0) {
        total.scale_exponent = rep.scale_exponent;
        total.exact_path = rep.exact_path;
      }
      ECHO_CUDA_CHECK(cudaSetDevice(devices_[r]));
      ECHO_CUDA_CHECK(cudaMemcpy(b.host.data(), b.out, count * esize, cudaMemcpyDeviceToHost));
      decode_dtype(b.host.data(), count, spec_.dtype, outputs[r]);
      if (compensated != nullptr && compensated[r] != nullptr) {
        ECHO_CUDA_CHECK(cudaMemcpy(compensated[r], b.compensated, count * 4, cudaMemcpyDeviceToHost));
      }
    }
    if (compensate) state_count_ = count;
    if (report != nullptr) *report = total;
    return Status::Ok();
  }

  void reset_compensator() override {
    for (int r = 0; r < ranks_; ++r) {
      if (bufs_[r].state == nullptr) continue;
      cudaSetDevice(devices_[r]);
      (void)echo::cuda::reset_compensator(bufs_[r].state, bufs_[r].stream);
    }
    state_count_ = 0;
  }

 private:
  int ranks_;
  AllReduceSpec spec_;
  std::vector<int> devices_;
  std::vector<Communicator*> comms_;
  std::vector<RankBuffers> bufs_;
  std::size_t state_count_ = 0;
  CommOptions options_;
};

}  // namespace

Status HostGroup::create(int ranks, const AllReduceSpec& spec, std::unique_ptr<HostGroup>* out,
                         std::size_t exact_capacity, std::size_t split_tail_min_count) {
  if (out == nullptr) return Status(StatusCode::kInvalidArgument, "null output");
  ECHO_TRY(can_implement(spec, ranks));
  auto g = std::make_unique<HostGroupImpl>(ranks, spec, exact_capacity, split_tail_min_count);
  ECHO_TRY(g->init());
  *out = std::move(g);
  return Status::Ok();
}

}  // namespace echo::cuda
