// Owners of the CUDA objects the benchmarks make: each frees its object on the device that made
// it when it goes out of scope, so an error that ends a run early leaks nothing. Releases in
// destructors cannot report failures; a run's explicit synchronizations report device errors.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>

#include "cuda_check.h"

namespace echo::bench {

// Device memory on one device.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept { swap(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    DeviceBuffer(std::move(o)).swap(*this);
    return *this;
  }
  ~DeviceBuffer() {
    if (ptr_ == nullptr) return;
    (void)cudaSetDevice(device_);
    (void)cudaFree(ptr_);
  }

  // `bytes` on `device` (made current), replacing what this held.
  Status allocate(int device, std::size_t bytes, const std::string& what) {
    DeviceBuffer b;
    b.device_ = device;
    ECHO_BENCH_CUDA(cudaSetDevice(device), what + ": cudaSetDevice");
    ECHO_BENCH_CUDA(cudaMalloc(&b.ptr_, bytes), what + ": cudaMalloc of " + std::to_string(bytes) + " bytes");
    swap(b);
    return Status::Ok();
  }
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void swap(DeviceBuffer& o) noexcept {
    std::swap(device_, o.device_);
    std::swap(ptr_, o.ptr_);
  }
  int device_ = 0;
  void* ptr_ = nullptr;
};

// A non-blocking stream on one device.
class Stream {
 public:
  Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Stream(Stream&& o) noexcept : device_(o.device_), stream_(std::exchange(o.stream_, nullptr)) {}
  ~Stream() {
    if (stream_ == nullptr) return;
    (void)cudaSetDevice(device_);
    (void)cudaStreamSynchronize(stream_);
    (void)cudaStreamDestroy(stream_);
  }
  Status create(int device, const std::string& what) {
    device_ = device;
    ECHO_BENCH_CUDA(cudaSetDevice(device), what + ": cudaSetDevice");
    ECHO_BENCH_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), what + ": cudaStreamCreate");
    return Status::Ok();
  }
  cudaStream_t get() const { return stream_; }

 private:
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
};

// A timing event on the current device.
class Event {
 public:
  Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
  ~Event() {
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
  }
  Status create(const std::string& what) { return cuda_status(cudaEventCreate(&event_), what + ": cudaEventCreate"); }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// An instantiated CUDA graph.
class GraphExec {
 public:
  GraphExec() = default;
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  ~GraphExec() {
    if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
  }
  // Instantiates `graph`, which it then destroys.
  Status instantiate(cudaGraph_t graph, const std::string& what) {
    const cudaError_t e = cudaGraphInstantiate(&exec_, graph, 0);
    (void)cudaGraphDestroy(graph);
    return cuda_status(e, what + ", instantiate");
  }
  cudaGraphExec_t get() const { return exec_; }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace echo::bench
