// The public conversions and the element loops over echo/numerics/dtype_rounding.h, where the
// rounding rules are written once for host and device.
#include "echo/dtype.h"

#include <cstring>

#include "echo/numerics/dtype_rounding.h"

namespace echo {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat16: return "float16";
  }
  return "unknown";
}

const char* dtype_short_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "fp32";
    case DType::kBFloat16: return "bf16";
    case DType::kFloat16: return "fp16";
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

std::uint16_t float_to_half_bits(float value) { return numerics::float_to_half_bits(value); }

float half_bits_to_float(std::uint16_t bits) { return numerics::half_bits_to_float(bits); }

std::uint16_t float_to_bfloat16_bits(float value) { return numerics::float_to_bf16_bits(value); }

float bfloat16_bits_to_float(std::uint16_t bits) { return numerics::bf16_bits_to_float(bits); }

std::uint16_t float_to_half_bits_round_up(float value) {
  return numerics::float_to_half_bits_round_up(value);
}

float round_to_dtype(float value, DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return canonical_nan(value);
    case DType::kBFloat16: return numerics::round_to_bf16(value);
    case DType::kFloat16: return numerics::round_to_half(value);
  }
  return value;
}

void encode_dtype(const float* values, std::size_t count, DType dtype, void* bits) {
  auto* out = static_cast<unsigned char*>(bits);
  if (dtype == DType::kFloat32) {
    std::memcpy(out, values, count * 4);
    return;
  }
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint16_t v = dtype == DType::kBFloat16 ? float_to_bfloat16_bits(values[i]) : float_to_half_bits(values[i]);
    std::memcpy(out + 2 * i, &v, 2);
  }
}

void decode_dtype(const void* bits, std::size_t count, DType dtype, float* values) {
  const auto* in = static_cast<const unsigned char*>(bits);
  if (dtype == DType::kFloat32) {
    std::memcpy(values, in, count * 4);
    return;
  }
  for (std::size_t i = 0; i < count; ++i) {
    std::uint16_t v;
    std::memcpy(&v, in + 2 * i, 2);
    values[i] = dtype == DType::kBFloat16 ? bfloat16_bits_to_float(v) : half_bits_to_float(v);
  }
}

void round_to_dtype(float* values, std::size_t count, DType dtype) {
  if (dtype == DType::kFloat32) {
    canonicalize_nans(values, count);
    return;
  }
  if (dtype == DType::kBFloat16) {
#pragma omp parallel for simd schedule(static) if (count >= (1u << 18))
    for (std::size_t i = 0; i < count; ++i) values[i] = numerics::round_to_bf16(values[i]);
    return;
  }
  for (std::size_t i = 0; i < count; ++i) values[i] = round_to_dtype(values[i], dtype);
}

}  // namespace echo
