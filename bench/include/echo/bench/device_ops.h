// Device helpers of the benchmarks (nccl-tests style): data generation, the fp64 exact sum and
// error of a result, bitwise comparison of two results, SM-driven peer traffic, and a timed idle
// kernel for background-traffic duty cycles. Each launches on the current device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "echo/dtype.h"
#include "echo/status.h"

namespace echo::bench {

// Roughly normal values (sum of uniforms), different per seed, rounded to dtype.
Status fill_random(void* data, std::size_t count, DType dtype, std::uint64_t seed, cudaStream_t stream);
// acc[i] (+)= data[i] in fp64 (first: acc = data).
Status accumulate_fp64(double* acc, const void* data, std::size_t count, DType dtype, bool first,
                       cudaStream_t stream);
// sums[0] += sum (out - ref)^2, sums[1] += sum ref^2 (device doubles).
Status error_norms(const double* ref, const void* out, std::size_t count, DType dtype, double* sums,
                   cudaStream_t stream);
// *mismatches += number of 16-bit words of a and b that differ (same device).
Status count_mismatches(const void* a, const void* b, std::size_t bytes, unsigned long long* mismatches,
                        cudaStream_t stream);
// SM-driven peer traffic: every thread stores (or loads) 16-byte words to (from) each of the
// `num_peers` buffers (at most 8) of `bytes` bytes, as the Echo kernels do.
Status peer_store(void* const* peers, int num_peers, std::size_t bytes, cudaStream_t stream);
Status peer_load(const void* const* peers, int num_peers, std::size_t bytes, void* sink, cudaStream_t stream);
// Keeps one block busy for about `microseconds` (idle part of a background duty cycle).
Status spin(double microseconds, cudaStream_t stream);

}  // namespace echo::bench
