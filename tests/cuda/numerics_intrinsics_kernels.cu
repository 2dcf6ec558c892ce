// Kernels of tests/cuda/test_numerics_intrinsics.cpp: every fast path the kernels keep beside the
// shared numerics layer (conversion instructions, byte-permute code unpacking, the power-of-two
// residual), run over all its inputs next to the portable definition it stands for.
#include "numerics_intrinsics_kernels.h"

#include <cuda_runtime_api.h>

#include "echo/numerics/compensator_step.h"
#include "echo/numerics/dtype_rounding.h"
#include "device/lane_io.cuh"
#include "device/numerics.cuh"

namespace echo::test {
namespace {

using namespace echo::cuda::device;
namespace portable = echo::numerics::portable;

struct Tally {
  unsigned long long mismatches;
  unsigned long long first;  // smallest input that mismatched
};

__device__ void record(Tally* t, unsigned long long input) {
  atomicAdd(&t->mismatches, 1ull);
  atomicMin(&t->first, input);
}

// Every 32-bit pattern once, over a grid-stride loop.
#define FOR_ALL_WORDS(i)                                                                       \
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; \
       i < (1ull << 32); i += static_cast<unsigned long long>(gridDim.x) * blockDim.x)

__global__ void half_rne_kernel(Tally* t) {
  FOR_ALL_WORDS(i) {
    const unsigned u = static_cast<unsigned>(i);
    const float v = __uint_as_float(u);
    if (v != v) continue;
    const float w = __uint_as_float(u ^ 0x80001234u);  // a second operand for the pair conversion
    const std::uint16_t want = portable::float_to_half_bits_rne(v);
    bool ok = numerics::finite_to_half_bits(v) == want && Elem<DType::kFloat16>::store_not_nan(v) == want;
    if (w == w) {
      const unsigned pair = Elem<DType::kFloat16>::store_pair_not_nan(v, w);
      ok = ok && pair == (want | (static_cast<unsigned>(portable::float_to_half_bits_rne(w)) << 16));
    }
    if (!ok) record(t, i);
  }
}

__global__ void half_round_up_kernel(Tally* t) {
  FOR_ALL_WORDS(i) {
    const unsigned u = static_cast<unsigned>(i);
    if (u > 0x7F800000u) continue;  // v >= 0 up to +Inf
    const float v = __uint_as_float(u);
    if (numerics::nonnegative_to_half_bits_up(v) != portable::float_to_half_bits_up(v)) record(t, i);
  }
}

__global__ void half_to_float_kernel(Tally* t) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= 0x10000u) return;
  const std::uint16_t h = static_cast<std::uint16_t>(i);
  const float want = portable::half_bits_to_float(h);
  const float got = numerics::half_bits_to_float(h);  // the device path: cvt.f32.f16
  const bool ok = want != want ? got != got : __float_as_uint(got) == __float_as_uint(want);
  if (!ok) record(t, i);
}

__global__ void bf16_rne_kernel(Tally* t) {
  FOR_ALL_WORDS(i) {
    const unsigned u = static_cast<unsigned>(i);
    const float v = __uint_as_float(u);
    if (v != v) continue;
    const float w = __uint_as_float(u ^ 0x80001234u);
    const std::uint16_t want = numerics::float_to_bf16_bits(v);
    bool ok = Elem<DType::kBFloat16>::store_not_nan(v) == want;
    if (w == w) {
      const unsigned pair = Elem<DType::kBFloat16>::store_pair_not_nan(v, w);
      ok = ok && pair == (want | (static_cast<unsigned>(numerics::float_to_bf16_bits(w)) << 16));
    }
    if (!ok) record(t, i);
  }
}

__global__ void pow2_residual_kernel(Tally* t) {
  FOR_ALL_WORDS(i) {
    const float y = __uint_as_float(static_cast<unsigned>(i));
    if (y != y) continue;
    const float x = 0.375f;
    for (int p = 2; p <= 8; p *= 2) {
      const float fp = static_cast<float>(p);
      const float a = numerics::global_residual_pow2(x, y, 1.0f / fp);
      const float b = numerics::global_residual(x, y, fp);
      if (__float_as_uint(a) != __float_as_uint(b) && !(a != a && b != b)) record(t, i);
    }
  }
}

// code_values() against get(), and pack() of encode_bits()-shaped words against the word itself.
template <int BITS>
__global__ void packed_codes_kernel(Tally* t) {
  constexpr int E = 32 / BITS;
  FOR_ALL_WORDS(i) {
    PackedCodes<BITS, E> c;
    c.w[0] = static_cast<std::uint32_t>(i);
    float q[E];
    c.code_values(q);
    unsigned b[E];
    bool ok = true;
#pragma unroll
    for (int k = 0; k < E; ++k) {
      ok = ok && q[k] == static_cast<float>(c.get(k));
      b[k] = __float_as_uint(__fadd_rn(numerics::kRintMagic, static_cast<float>(c.get(k))));
    }
    PackedCodes<BITS, E> packed;
    packed.pack(b);
    if (!ok || packed.w[0] != c.w[0]) record(t, i);
  }
}

template <typename Kernel>
NumericsCheck run(Kernel kernel, int grid) {
  NumericsCheck out;
  Tally* t = nullptr;
  if ((out.error = cudaMalloc(&t, sizeof(Tally))) != cudaSuccess) return out;
  const Tally init{0ull, ~0ull};
  out.error = cudaMemcpy(t, &init, sizeof init, cudaMemcpyHostToDevice);
  if (out.error == cudaSuccess) {
    kernel<<<grid, 256>>>(t);
    out.error = cudaGetLastError();
  }
  Tally host{};
  if (out.error == cudaSuccess) out.error = cudaMemcpy(&host, t, sizeof host, cudaMemcpyDeviceToHost);
  cudaFree(t);
  out.mismatches = host.mismatches;
  out.first = host.first;
  return out;
}

constexpr int kSweepGrid = 132 * 16;

}  // namespace

NumericsCheck check_half_round_to_nearest_even() { return run(half_rne_kernel, kSweepGrid); }
NumericsCheck check_half_round_up() { return run(half_round_up_kernel, kSweepGrid); }
NumericsCheck check_half_to_float() { return run(half_to_float_kernel, 0x10000 / 256); }
NumericsCheck check_bf16_round_to_nearest_even() { return run(bf16_rne_kernel, kSweepGrid); }
NumericsCheck check_pow2_residual() { return run(pow2_residual_kernel, kSweepGrid); }
NumericsCheck check_packed_codes(int bits) {
  return bits == 4 ? run(packed_codes_kernel<4>, kSweepGrid) : run(packed_codes_kernel<8>, kSweepGrid);
}

}  // namespace echo::test
