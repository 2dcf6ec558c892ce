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

GroupMap make_group_map(const QuantSpec& spec, float mn, float mx, bool finite);

}  // namespace echo::detail
