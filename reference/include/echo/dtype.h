// Element types of the all-reduce and their exact round-to-nearest-even conversions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace echo {

enum class DType : std::uint8_t { kFloat32 = 0, kBFloat16 = 1, kFloat16 = 2 };

// "float32", "bfloat16", "float16" (the trace format's spelling).
const char* dtype_name(DType dtype);
// Accepts the names above plus the short forms "fp32", "bf16", "fp16".
std::optional<DType> parse_dtype(std::string_view name);
std::size_t dtype_size(DType dtype);

// The one NaN of each type that the library writes (docs/numerics.md 1): the positive quiet NaN.
// IEEE 754 leaves the sign and payload of a NaN result to the implementation (x86 returns the
// first NaN operand, a GPU its own canonical NaN, and a compiler may swap the operands of a
// commutative operation), so every NaN is rewritten to these where a value is stored.
inline constexpr std::uint32_t kCanonicalNaNFloat = 0x7FC00000u;
inline constexpr std::uint16_t kCanonicalNaNBFloat16 = 0x7FC0;
inline constexpr std::uint16_t kCanonicalNaNHalf = 0x7E00;
// v, or the canonical fp32 NaN when v is NaN (inline: element loops vectorize with it).
inline float canonical_nan(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) bits = kCanonicalNaNFloat;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}
// canonical_nan() on count values in place.
void canonicalize_nans(float* values, std::size_t count);

// IEEE binary16 and bfloat16 bit patterns. All conversions from float round to nearest even;
// NaN becomes the canonical NaN of the type, overflow goes to +-Inf as IEEE requires.
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

}  // namespace echo
