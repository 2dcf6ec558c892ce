// Internal: everything the encoder needs for one group, derived once from its range.
#pragma once

#include "echo/quantizer.h"

namespace echo::detail {

struct GroupMap {
  GroupParams params;
  bool poisoned = false;
  float recip = 0.0f;       // fp32(1 / scale), 0 for an all-zero group
  float zero_add = 0.0f;    // zero-point added before rounding (0 for symmetric)
  float clip_lo = 0.0f;     // clamp range of t before rounding
  float clip_hi = 0.0f;
  float code_shift = 0.0f;  // 2^(b-1) for symmetric, else 0
};

// round_scale_to_nearest: the deliberate mistake of echo/alteration.h (fp16_rne instead of
// round_up_fp16 for the scale); false in every call of the all-reduce itself.
GroupMap make_group_map(const QuantSpec& spec, float mn, float mx, bool finite,
                        bool round_scale_to_nearest = false);

// echo::quantize with the scale rounding above.
std::size_t quantize(const QuantSpec& spec, const float* values, std::size_t count, std::uint8_t* codes,
                     GroupParams* params, bool round_scale_to_nearest);

}  // namespace echo::detail
