// Internal: the reference's quantize loop with the scale rounding of echo/alteration.h selectable.
#pragma once

#include <cstddef>
#include <cstdint>

#include "echo/quantizer.h"

namespace echo::detail {

// echo::quantize; round_scale_to_nearest is the deliberate mistake of echo/alteration.h (the fp16
// scale rounded to nearest instead of up), false in every call of the all-reduce itself.
std::size_t quantize(const QuantSpec& spec, const float* values, std::size_t count, std::uint8_t* codes,
                     GroupParams* params, OutlierEntry* outliers, bool round_scale_to_nearest);

}  // namespace echo::detail
