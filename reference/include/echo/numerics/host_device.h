// The scalar operations the numerics layer is written in, spelled once for host and device. Each
// arithmetic helper is one correctly rounded binary32 operation: the __f*_rn intrinsics on the
// device (never contracted, whatever -fmad says), the plain operator on the host (the build uses
// -ffp-contract=off and no fast-math). docs/numerics.md says which rule lives in which header.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define ECHO_HOST_DEVICE __host__ __device__ __forceinline__
#define ECHO_HOST_DEVICE_INLINE __host__ __device__ inline
#else
#define ECHO_HOST_DEVICE inline
#define ECHO_HOST_DEVICE_INLINE inline
#endif

namespace echo::numerics {

ECHO_HOST_DEVICE std::uint32_t float_to_bits(float v) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(v);
#else
  std::uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
#endif
}

ECHO_HOST_DEVICE float bits_to_float(std::uint32_t b) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(b);
#else
  float v;
  std::memcpy(&v, &b, sizeof v);
  return v;
#endif
}

ECHO_HOST_DEVICE float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

ECHO_HOST_DEVICE float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

ECHO_HOST_DEVICE float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

ECHO_HOST_DEVICE float div_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// fp32(sqrt(a)), correctly rounded on both sides (std::sqrt is IEEE's correctly rounded square
// root; __fsqrt_rn likewise).
ECHO_HOST_DEVICE float sqrt_rn(float a) {
#ifdef __CUDA_ARCH__
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

// fp32(1 / a), correctly rounded on both sides (__frcp_rn is IEEE round-to-nearest, not an
// approximation).
ECHO_HOST_DEVICE float rcp_rn(float a) {
#ifdef __CUDA_ARCH__
  return __frcp_rn(a);
#else
  return 1.0f / a;
#endif
}

// max and min for operands that are not NaN. The host spells std::max / std::min ((a < b) ? b : a,
// (b < a) ? b : a) so element loops vectorize; the device uses one max.f32 / min.f32. They can
// differ only in the sign of a zero result, which no caller lets reach a stored value.
ECHO_HOST_DEVICE float max_of(float a, float b) {
#ifdef __CUDA_ARCH__
  return fmaxf(a, b);
#else
  return a < b ? b : a;
#endif
}

ECHO_HOST_DEVICE float min_of(float a, float b) {
#ifdef __CUDA_ARCH__
  return fminf(a, b);
#else
  return b < a ? b : a;
#endif
}

ECHO_HOST_DEVICE float abs_of(float v) {
#ifdef __CUDA_ARCH__
  return fabsf(v);
#else
  return std::fabs(v);
#endif
}

// 2^k exactly, for the k of the backward exponent (|k| well inside the normal range).
ECHO_HOST_DEVICE float pow2(int k) {
#ifdef __CUDA_ARCH__
  return ldexpf(1.0f, k);
#else
  return std::ldexp(1.0f, k);
#endif
}

// The binary exponent e of v = f * 2^e with f in [0.5, 1) (frexp), for finite v > 0.
ECHO_HOST_DEVICE int frexp_exponent(float v) {
  int e = 0;
#ifdef __CUDA_ARCH__
  frexpf(v, &e);
#else
  std::frexp(v, &e);
#endif
  return e;
}

}  // namespace echo::numerics
