// Where the owner all-reduce runs its tail in a kernel of its own (no CUDA headers needed).
#pragma once

#include <cstddef>

namespace echo::cuda {

// Messages of at least this many elements run, where their kernel variant has a split form (the
// compensated 8-element lanes: dual or single compensator, local residual, groups up to 256),
// push + reduce in one kernel and the tail in a second launched after it, each with its own
// register allocation; their reduce then loads four peers' copies at once when P > 2. Smaller
// messages run one fused kernel. Bit-identical either way. The value is the P = 2 switch-over
// measured on 2 x H200 (docs/performance.md, "Split tail from 2^27 elements"): the second
// launch and the tails' lost overlap with the last pushes and reduces cost 2-9 us at 4-32 MiB of
// bf16 and 13-28 us at 64 MiB, nothing at 128 MiB; the split form gains 10-12 us at 256 MiB and
// 10-28 us at 1 GiB. Not measured at P > 2, where the batched reduce gains more.
inline constexpr std::size_t kDefaultSplitTailMinCount = std::size_t{1} << 27;

}  // namespace echo::cuda
