// Value and tensor element types of the GGUF file format (ggml's gguf.h and ggml.h numbering).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace echo::model {

enum class GgufValueType : std::uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

const char* gguf_value_type_name(GgufValueType type);

// Tensor element types. Only those with a known block layout are listed; the reader refuses the
// rest because it cannot check their extent in the file.
enum class GgmlType : std::uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kBF16 = 30,
};

struct GgmlTypeTraits {
  const char* name;
  std::size_t block_elements;  // values per block
  std::size_t block_bytes;     // bytes per block
  bool dequantizable;          // dequantize() supports it
};

// Traits of a raw type number, or nullopt when the number is not a known layout.
std::optional<GgmlTypeTraits> ggml_type_traits(std::uint32_t raw_type);

}  // namespace echo::model
