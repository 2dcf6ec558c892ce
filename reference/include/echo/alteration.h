// The reference with one deliberate departure from docs/numerics.md. It names the mistake of an
// implementation that does not conform (echotk verify recomputes with each one and reports any that
// reproduces the implementation's outputs; docs/conformance.md) and serves the tests as a known
// wrong implementation. It is never a mode of the all-reduce itself.
#pragma once

#include <cstdint>

#include "echo/allreduce.h"

namespace echo {

enum class Alteration : std::uint8_t {
  kNone = 0,
  // Quantizer scales rounded to the nearest fp16 value instead of up (numerics 1 and 2.2 step 2).
  kScaleRoundedToNearest = 1,
  // Owner and exact-path sums formed v_{P-1} + ... + v_0 instead of in rank order (numerics 4).
  kRanksSummedInReverse = 2,
  // Compensator 'deficit' at a post-norm site: the update adds the residual u through the norm's
  // gains instead of u - c, the correction applied not subtracted (numerics 6.2, Update): the open
  // loop the mode closes.
  kDeficitCorrectionNotSubtracted = 3,
};

const char* alteration_name(Alteration alteration);

struct SiteInfo;  // echo/site.h

// echo::allreduce with the alteration made (echo::allreduce_at_site where `site` is given); kNone
// is the contract.
Status allreduce_altered(Alteration alteration, const AllReduceSpec& spec, int ranks, std::size_t count,
                         const float* const* inputs, float* const* outputs, CompensatorState* states,
                         float* const* compensated, AllReduceReport* report,
                         AllReduceWorkspace* workspace = nullptr, const SiteInfo* site = nullptr);

}  // namespace echo
