// The owner all-reduce kernel (included once per dtype and bit width by
// owner_allreduce_<dtype>_b<bits>.cu): the owner all-reduce over peer-to-peer writes (paper Sec. 4.2
// and Appendix C; numerics in docs/numerics.md 4). One persistent kernel per rank and launch runs
// the four stages as jobs on tiles of whole groups (or, in the split form of some variants, two
// kernels one after the other: push + reduce + gather, then the tail; owner_split_tail in launch.h):
//   push   quantize segment j != rank of x' = x + c, write codes + fp16 parameters into owner j,
//          publish push flag [rank][tile] on j                                     (owner/push.cuh)
//   reduce wait for the P-1 push flags of a tile, dequantize the copies, fp32 sum in rank order
//          with the own full-precision values, requantize once                   (owner/reduce.cuh)
//   gather write the reduced codes into every peer, publish gather flag [rank][tile] there; the
//          owner dequantizes its own output from the same codes                  (owner/reduce.cuh)
//   tail   wait for owner j's gather flag of a tile, dequantize, write the output  (owner/tail.cuh)
// Jobs are ordered in steps (push of tile s, reduce of tile s - lag, tail of s - lag - tail_lag), the
// same order on every rank, and blocks take them from a per-rank queue in that order (one atomic
// per job; owner/kernel.cuh). A job waits only for jobs of earlier steps on other ranks, which some
// resident block there has already taken, so the kernel cannot deadlock whatever the residency, and
// tiles of different stages overlap (quantization hides behind transfers). Push and reduce run a
// lean copy of their loop on lean tiles (whole block iterations of whole groups, aligned buffers,
// forward; OwnerStages::lean_tile) with every per-lane condition known at compile time, and the
// general loop elsewhere; both compute the same bits.
//   owner/variant.cuh          the variant policy: stages of an instance, loads, peer batch, lean copies
//   owner/tiles.cuh            tiles, flags, a lane's place in a tile, input words
//   owner/lanes.cuh            OwnerStages: the call's context and the lane work the stages share
//   owner/job_trace.cuh        the recorder policy of ECHO_CUDA_JOB_TRACE (nothing when off)
//   owner/kernel.cuh           the iteration skeleton: job queue, job decode, epilogue
//   owner/launch_variants.cuh  the host side: variant list, instance per launch, residency, preload
// The rounds and epochs the flags carry: docs/cuda-api.md, "Rounds and epochs".
#pragma once

#include "kernels/owner/launch_variants.cuh"
