// Backward scaling (docs/numerics.md 5): the shared power-of-two exponent of a backward call.
#pragma once

#include "echo/numerics/constants.h"
#include "echo/numerics/dtype_rounding.h"
#include "echo/numerics/host_device.h"

namespace echo::numerics {

// k with max_abs * 2^k in [2^14, 2^15); 0 when max_abs is 0 or not finite.
ECHO_HOST_DEVICE int backward_exponent(float max_abs) {
  if (!(max_abs > 0.0f) || !is_finite(max_abs)) return 0;
  // max_abs = f * 2^e with f in [0.5, 1): the exponent of [1, 2) is e - 1.
  return kBackwardTargetExponent - (frexp_exponent(max_abs) - 1);
}

}  // namespace echo::numerics
