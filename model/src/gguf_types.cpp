#include "echo/model/gguf_types.h"

namespace echo::model {

const char* gguf_value_type_name(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8: return "uint8";
    case GgufValueType::kInt8: return "int8";
    case GgufValueType::kUint16: return "uint16";
    case GgufValueType::kInt16: return "int16";
    case GgufValueType::kUint32: return "uint32";
    case GgufValueType::kInt32: return "int32";
    case GgufValueType::kFloat32: return "float32";
    case GgufValueType::kBool: return "bool";
    case GgufValueType::kString: return "string";
    case GgufValueType::kArray: return "array";
    case GgufValueType::kUint64: return "uint64";
    case GgufValueType::kInt64: return "int64";
    case GgufValueType::kFloat64: return "float64";
  }
  return "unknown";
}

std::optional<GgmlTypeTraits> ggml_type_traits(std::uint32_t raw_type) {
  // Block layouts from ggml-common.h: fp16 parameters plus packed codes per block.
  switch (static_cast<GgmlType>(raw_type)) {
    case GgmlType::kF32: return GgmlTypeTraits{"F32", 1, 4, true};
    case GgmlType::kF16: return GgmlTypeTraits{"F16", 1, 2, true};
    case GgmlType::kBF16: return GgmlTypeTraits{"BF16", 1, 2, true};
    case GgmlType::kQ4_0: return GgmlTypeTraits{"Q4_0", 32, 18, true};
    case GgmlType::kQ4_1: return GgmlTypeTraits{"Q4_1", 32, 20, true};
    case GgmlType::kQ5_0: return GgmlTypeTraits{"Q5_0", 32, 22, false};
    case GgmlType::kQ5_1: return GgmlTypeTraits{"Q5_1", 32, 24, false};
    case GgmlType::kQ8_0: return GgmlTypeTraits{"Q8_0", 32, 34, true};
    case GgmlType::kQ8_1: return GgmlTypeTraits{"Q8_1", 32, 36, false};
    case GgmlType::kQ2_K: return GgmlTypeTraits{"Q2_K", 256, 84, false};
    case GgmlType::kQ3_K: return GgmlTypeTraits{"Q3_K", 256, 110, false};
    case GgmlType::kQ4_K: return GgmlTypeTraits{"Q4_K", 256, 144, false};
    case GgmlType::kQ5_K: return GgmlTypeTraits{"Q5_K", 256, 176, false};
    case GgmlType::kQ6_K: return GgmlTypeTraits{"Q6_K", 256, 210, false};
    case GgmlType::kQ8_K: return GgmlTypeTraits{"Q8_K", 256, 292, false};
  }
  return std::nullopt;
}

}  // namespace echo::model
