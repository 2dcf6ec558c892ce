// The verification columns of a row: #wrong (every rank's output against the CPU reference, bit
// for bit, on sizes up to kReferenceMaxCount), #differ (ranks whose output differs from rank 0's
// anywhere) and the relative error of rank 0's result against the exact fp64 sum.
#pragma once

#include <cstddef>
#include "context.h"
#include "rows.h"
#include "timing.h"
#include "verification.h"

namespace echo::bench {

// Fills every rank's input for a message of `count` elements (the same data for every row of a
// size), then, unless verification is skipped, the fp64 exact sum on devs[0] and, up to
// kReferenceMaxCount, the host copies the reference check reads.
Status prepare_inputs(Context& c, std::size_t count);

// #differ and the error of the outputs the timed calls left.
Status compare_outputs(const Context& c, std::size_t count, Verification* v);

// #wrong: `call` (one Echo call per rank, the row's) run kCheckCalls times from a reset compensator,
// every rank's output against the CPU reference of the same calls. Leaves v->wrong empty for the
// NCCL baseline (no bit-exact reference) and above kReferenceMaxCount.
Status check_against_reference(Context& c, const RowSpec& row, std::size_t count, const RankCall& call,
                               Verification* v);

// Calls of the reference check: the second applies the compensator the first one updated.
inline constexpr int kCheckCalls = 2;

}  // namespace echo::bench
