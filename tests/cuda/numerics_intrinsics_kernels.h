// Host entry points of tests/cuda/numerics_intrinsics_kernels.cu: each runs one sweep on the
// current device and reports how many inputs the fast path and the shared definition disagree on.
#pragma once

#include <cuda_runtime_api.h>

namespace echo::test {

struct NumericsCheck {
  cudaError_t error = cudaSuccess;
  unsigned long long mismatches = 0;
  unsigned long long first = 0;  // the smallest mismatching input (bits)
};

NumericsCheck check_half_round_to_nearest_even();  // cvt.rn.f16.f32 (scalar and x2), all floats
NumericsCheck check_half_round_up();               // cvt.ru.f16.f32, all floats in [0, +Inf]
NumericsCheck check_half_to_float();               // cvt.f32.f16, all 2^16 patterns
NumericsCheck check_bf16_round_to_nearest_even();  // cvt.rn.bf16.f32 (scalar and x2), all floats
NumericsCheck check_pow2_residual();               // y * (1 / P) == y / P for P = 2, 4, 8, all y
NumericsCheck check_packed_codes(int bits);        // PackedCodes unpack and pack, all words

}  // namespace echo::test
