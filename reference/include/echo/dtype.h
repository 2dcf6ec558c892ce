// Element types of the all-reduce and their exact round-to-nearest-even conversions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace echo {

enum class DType : std::uint8_t { kFloat32 = 0, kBFloat16 = 1, kFloat16 = 2 };

// "float32", "bfloat16", "float16" (the trace format's spelling).
const char* dtype_name(DType dtype);
// Accepts the names above plus the short forms "fp32", "bf16", "fp16".
std::optional<DType> parse_dtype(std::string_view name);
std::size_t dtype_size(DType dtype);

// IEEE binary16 and bfloat16 bit patterns. All conversions from float round to nearest even;
// NaN stays NaN (quiet), overflow goes to +-Inf as IEEE requires.
std::uint16_t float_to_half_bits(float value);
float half_bits_to_float(std::uint16_t bits);
std::uint16_t float_to_bfloat16_bits(float value);
float bfloat16_bits_to_float(std::uint16_t bits);

// Smallest binary16 value >= value, for value >= 0 (NaN for NaN input, +Inf past 65504).
// Quantizer scales are rounded this way so the grid always covers the group (docs/numerics.md).
std::uint16_t float_to_half_bits_round_up(float value);

// Rounds a float to the nearest value representable in dtype (identity for kFloat32).
float round_to_dtype(float value, DType dtype);
// Rounds count values in place.
void round_to_dtype(float* values, std::size_t count, DType dtype);

}  // namespace echo
