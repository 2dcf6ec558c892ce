// Test helper: P ranks of the device API over the GPUs present, with host<->device staging and
// the CPU reference run beside it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "echo/allreduce.h"
#include "echo/cuda/communicator.h"
#include "echo/cuda/host_group.h"
#include "echo/dtype.h"

namespace echo::test {

// Whether the GPU tests can run here. Where CUDA reports no usable device (none present, or a
// driver that cannot serve this runtime) a case prints "skipped (needs ...)" and returns, which
// CTest reports as skipped (SKIP_REGULAR_EXPRESSION, cmake/EchoDiscoverBoostTests.cmake), never as
// passed; with ECHO_REQUIRE_GPU=1 (scripts/gpu_check.sh) the case fails instead.
inline bool gpu_present() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaSuccess && n > 0) return true;
  const std::string why = e != cudaSuccess ? cudaGetErrorString(e) : "no device";
  (void)cudaGetLastError();
  const char* required = std::getenv("ECHO_REQUIRE_GPU");
  if (required != nullptr && std::string(required) == "1") {
    BOOST_FAIL("ECHO_REQUIRE_GPU=1 but CUDA has no usable device: " << why);
  }
  std::cout << "skipped (needs a usable CUDA device: " << why << ")" << std::endl;
  return false;
}

#define TEST_CUDA(expr) BOOST_REQUIRE_EQUAL(static_cast<int>(expr), 0)
#define TEST_OK(expr)                                  \
  do {                                                 \
    const ::echo::Status s_ = (expr);                  \
    BOOST_REQUIRE_MESSAGE(s_.ok(), s_.message());      \
  } while (0)

inline std::vector<unsigned char> to_bits(const std::vector<float>& x, DType dt) {
  const std::size_t es = dtype_size(dt);
  std::vector<unsigned char> out(x.size() * es);
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (dt == DType::kFloat32) {
      std::memcpy(&out[4 * i], &x[i], 4);
    } else {
      const std::uint16_t v = dt == DType::kBFloat16 ? float_to_bfloat16_bits(x[i]) : float_to_half_bits(x[i]);
      std::memcpy(&out[2 * i], &v, 2);
    }
  }
  return out;
}

inline std::vector<float> from_bits(const std::vector<unsigned char>& b, DType dt) {
  const std::size_t es = dtype_size(dt);
  std::vector<float> out(b.size() / es);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (dt == DType::kFloat32) {
      std::memcpy(&out[i], &b[4 * i], 4);
    } else {
      std::uint16_t v;
      std::memcpy(&v, &b[2 * i], 2);
      out[i] = dt == DType::kBFloat16 ? bfloat16_bits_to_float(v) : half_bits_to_float(v);
    }
  }
  return out;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

struct DeviceGroup {
  int ranks = 0;
  std::vector<int> devices;
  std::vector<cuda::Communicator*> comms;
  std::vector<cudaStream_t> streams;
  std::vector<cuda::CompensatorBuffers*> states;

  void create(int p, const cuda::CommOptions& opt, std::size_t state_capacity) {
    ranks = p;
    const int n = cuda::device_count();
    devices.resize(p);
    for (int r = 0; r < p; ++r) devices[r] = r % n;
    comms.assign(p, nullptr);
    TEST_OK(cuda::create_group(p, devices.data(), opt, comms.data()));
    streams.resize(p);
    states.assign(p, nullptr);
    for (int r = 0; r < p; ++r) {
      TEST_CUDA(cudaSetDevice(devices[r]));
      TEST_CUDA(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
      if (state_capacity > 0) TEST_OK(cuda::create_compensator(comms[r], state_capacity, &states[r]));
    }
  }
  void destroy() {
    for (int r = 0; r < ranks; ++r) {
      cudaSetDevice(devices[r]);
      cudaStreamSynchronize(streams[r]);
      if (states[r]) cuda::destroy_compensator(states[r]);
      cudaStreamDestroy(streams[r]);
      cuda::destroy(comms[r]);
    }
    ranks = 0;
  }
  // Waits for every rank; fails on any error (a timeout included).
  void sync() {
    for (int r = 0; r < ranks; ++r) TEST_OK(cuda::synchronize(comms[r], nullptr));
  }
};

}  // namespace echo::test
