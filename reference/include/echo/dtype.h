// Element types of the all-reduce and their exact round-to-nearest-even conversions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "echo/numerics/constants.h"
#include "echo/numerics/dtype_rounding.h"

namespace echo {

enum class DType : std::uint8_t { kFloat32 = 0, kBFloat16 = 1, kFloat16 = 2 };

// "float32", "bfloat16", "float16" (the trace format's spelling).
const char* dtype_name(DType dtype);
// "fp32", "bf16", "fp16" (the command line's and echotk.Spec's spelling).
const char* dtype_short_name(DType dtype);
// Accepts the names above plus the short forms "fp32", "bf16", "fp16".
std::optional<DType> parse_dtype(std::string_view name);
std::size_t dtype_size(DType dtype);

// The one NaN of each type that the library writes, and canonical_nan(v): v, or the canonical
// fp32 NaN when v is NaN (echo/numerics/constants.h and dtype_rounding.h, docs/numerics.md 1).
using numerics::canonical_nan;
using numerics::kCanonicalNaNBFloat16;
using numerics::kCanonicalNaNFloat;
using numerics::kCanonicalNaNHalf;
// canonical_nan() on count values in place.
void canonicalize_nans(float* values, std::size_t count);

// IEEE binary16 and bfloat16 bit patterns. All conversions from float round to nearest even;
// NaN becomes the canonical NaN of the type, overflow goes to +-Inf as IEEE requires (the rules:
// echo/numerics/dtype_rounding.h).
std::uint16_t float_to_half_bits(float value);
float half_bits_to_float(std::uint16_t bits);
std::uint16_t float_to_bfloat16_bits(float value);
float bfloat16_bits_to_float(std::uint16_t bits);

// Smallest binary16 value >= value, for value >= 0 (NaN for NaN input, +Inf past 65504).
// Quantizer scales are rounded this way so the grid always covers the group (docs/numerics.md).
std::uint16_t float_to_half_bits_round_up(float value);

// Rounds a float to the nearest value representable in dtype (identity for kFloat32 except that
// every NaN becomes the canonical one).
float round_to_dtype(float value, DType dtype);
// Rounds count values in place.
void round_to_dtype(float* values, std::size_t count, DType dtype);

// count values as the dtype's bits, count * dtype_size(dtype) bytes at `bits` (fp32 copied as they
// are; bf16 and fp16 through float_to_bfloat16_bits and float_to_half_bits), and back (exact).
void encode_dtype(const float* values, std::size_t count, DType dtype, void* bits);
void decode_dtype(const void* bits, std::size_t count, DType dtype, float* values);

}  // namespace echo
