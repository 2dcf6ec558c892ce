// Conversions delegate to Eigen's half and bfloat16, which round to nearest even (in software, or
// with F16C's round-to-nearest mode when the compiler enables it).
#include "echo/dtype.h"

#include <cmath>
#include <cstring>

#include <Eigen/Core>

namespace echo {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat16: return "float16";
  }
  return "unknown";
}

std::optional<DType> parse_dtype(std::string_view name) {
  if (name == "float32" || name == "fp32") return DType::kFloat32;
  if (name == "bfloat16" || name == "bf16") return DType::kBFloat16;
  if (name == "float16" || name == "fp16") return DType::kFloat16;
  return std::nullopt;
}

std::size_t dtype_size(DType dtype) { return dtype == DType::kFloat32 ? 4 : 2; }

void canonicalize_nans(float* values, std::size_t count) {
#pragma omp parallel for simd schedule(static) if (count >= (1u << 18))
  for (std::size_t i = 0; i < count; ++i) values[i] = canonical_nan(values[i]);
}

std::uint16_t float_to_half_bits(float value) {
  // Eigen's NaN keeps the sign, and with F16C the payload as well: the contract's NaN instead.
  if (std::isnan(value)) return kCanonicalNaNHalf;
  return Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(value));
}

float half_bits_to_float(std::uint16_t bits) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits));
}

std::uint16_t float_to_bfloat16_bits(float value) {
  if (std::isnan(value)) return kCanonicalNaNBFloat16;  // Eigen keeps the sign
  return Eigen::numext::bit_cast<std::uint16_t>(Eigen::bfloat16(value));
}

float bfloat16_bits_to_float(std::uint16_t bits) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(bits));
}

std::uint16_t float_to_half_bits_round_up(float value) {
  std::uint16_t bits = float_to_half_bits(value);
  if (std::isnan(value)) return bits;
  // Non-negative binary16 patterns are ordered like the values they encode, so +1 is "next up";
  // 0x7BFF (65504) + 1 is +Inf.
  if (half_bits_to_float(bits) < value) ++bits;
  return bits;
}

float round_to_dtype(float value, DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return canonical_nan(value);
    case DType::kBFloat16: return bfloat16_bits_to_float(float_to_bfloat16_bits(value));
    case DType::kFloat16: return half_bits_to_float(float_to_half_bits(value));
  }
  return value;
}

void round_to_dtype(float* values, std::size_t count, DType dtype) {
  if (dtype == DType::kFloat32) {
    canonicalize_nans(values, count);
    return;
  }
  if (dtype == DType::kBFloat16) {
    // The same conversion as float_to_bfloat16_bits, on bit patterns so it vectorizes: add 0x7FFF
    // plus the lowest kept bit, then clear the low half; a NaN becomes the canonical 0x7FC0 (as the
    // scalar conversion and the CUDA kernels do).
#pragma omp parallel for simd schedule(static) if (count >= (1u << 18))
    for (std::size_t i = 0; i < count; ++i) {
      std::uint32_t bits;
      std::memcpy(&bits, &values[i], sizeof bits);
      const bool is_nan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
      const std::uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
      const std::uint32_t out = is_nan ? kCanonicalNaNFloat : rounded;
      std::memcpy(&values[i], &out, sizeof out);
    }
    return;
  }
  for (std::size_t i = 0; i < count; ++i) values[i] = round_to_dtype(values[i], dtype);
}

}  // namespace echo
