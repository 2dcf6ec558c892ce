#include "echo/model/dequantize.h"

#include <cstring>
#include <string>

#include "echo/dtype.h"

namespace echo::model {
namespace {

float load_half(const std::uint8_t* p) {
  std::uint16_t bits;
  std::memcpy(&bits, p, sizeof bits);  // GGUF is little-endian, as is every host we build for
  return half_bits_to_float(bits);
}

// Q4_0: fp16 d, then 16 bytes; low nibbles are values 0..15, high nibbles 16..31; x = (q - 8) d.
void dequantize_q4_0(const std::uint8_t* block, float* out) {
  const float d = load_half(block);
  const std::uint8_t* qs = block + 2;
  for (int j = 0; j < 16; ++j) {
    out[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
    out[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

// Q4_1: fp16 d, fp16 m, then 16 bytes of nibbles as in Q4_0; x = q d + m.
void dequantize_q4_1(const std::uint8_t* block, float* out) {
  const float d = load_half(block);
  const float m = load_half(block + 2);
  const std::uint8_t* qs = block + 4;
  for (int j = 0; j < 16; ++j) {
    out[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
    out[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// Q8_0: fp16 d, then 32 signed bytes; x = q d.
void dequantize_q8_0(const std::uint8_t* block, float* out) {
  const float d = load_half(block);
  for (int j = 0; j < 32; ++j) {
    out[j] = static_cast<float>(static_cast<std::int8_t>(block[2 + j])) * d;
  }
}

}  // namespace

Status dequantize(GgmlType type, const std::uint8_t* bytes, std::size_t num_bytes,
                  std::size_t count, float* out) {
  const auto traits = ggml_type_traits(static_cast<std::uint32_t>(type));
  if (!traits || !traits->dequantizable) {
    return Status(StatusCode::kUnsupported,
                  std::string("no dequantizer for tensor type ") + (traits ? traits->name : "?"));
  }
  if (count % traits->block_elements != 0 ||
      num_bytes != count / traits->block_elements * traits->block_bytes) {
    return Status(StatusCode::kInvalidArgument,
                  std::string("dequantize: ") + std::to_string(count) + " values of type " +
                      traits->name + " do not occupy " + std::to_string(num_bytes) + " bytes");
  }
  const std::size_t num_blocks = count / traits->block_elements;
  for (std::size_t b = 0; b < num_blocks; ++b) {
    const std::uint8_t* block = bytes + b * traits->block_bytes;
    float* dst = out + b * traits->block_elements;
    switch (type) {
      case GgmlType::kF32: std::memcpy(dst, block, 4); break;
      case GgmlType::kF16: dst[0] = load_half(block); break;
      case GgmlType::kBF16: {
        std::uint16_t bits;
        std::memcpy(&bits, block, sizeof bits);
        dst[0] = bfloat16_bits_to_float(bits);
        break;
      }
      case GgmlType::kQ4_0: dequantize_q4_0(block, dst); break;
      case GgmlType::kQ4_1: dequantize_q4_1(block, dst); break;
      case GgmlType::kQ8_0: dequantize_q8_0(block, dst); break;
      default: break;  // excluded by traits->dequantizable above
    }
  }
  return Status::Ok();
}

}  // namespace echo::model
