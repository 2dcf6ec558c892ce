// Max |x'| over a block, for the backward mode's shared exponent (docs/numerics.md 5): the P2P
// path's backward_max kernel and the one-GPU emulation's both reduce with these.
#pragma once

namespace echo::cuda::device {

// |x| as bits: non-negative floats order like unsigned integers. A NaN counts as non-finite, like
// +Inf (exponent k = 0).
__device__ __forceinline__ unsigned abs_bits_for_max(float x) {
  const unsigned b = __float_as_uint(x) & 0x7FFFFFFFu;
  return b > 0x7F800000u ? 0x7F800000u : b;
}

// The max of every thread's v over the block, valid in thread 0: warp shuffles, then one shared
// word per warp (warp_max[kWarps] in shared memory). Every thread of the block calls it.
template <int kWarps>
__device__ __forceinline__ unsigned block_max_to_thread0(unsigned v, unsigned* warp_max) {
  for (int off = 16; off > 0; off >>= 1) {
    const unsigned o = __shfl_xor_sync(0xFFFFFFFFu, v, off);
    v = o > v ? o : v;
  }
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kWarps; ++w) v = warp_max[w] > v ? warp_max[w] : v;
  }
  return v;
}

}  // namespace echo::cuda::device
