// Dequantization of GGUF tensor blocks to fp32, bit-exact with ggml's reference (non-SIMD) code:
// each value is computed from fp16 block parameters widened to fp32, without fused multiply-add.
#pragma once

#include <cstddef>
#include <cstdint>

#include "echo/model/gguf_types.h"
#include "echo/status.h"

namespace echo::model {

// Converts count values (a multiple of the type's block size) stored in bytes[num_bytes].
// Returns kUnsupported for a type without a dequantizer, kInvalidArgument for a size mismatch.
Status dequantize(GgmlType type, const std::uint8_t* bytes, std::size_t num_bytes,
                  std::size_t count, float* out);

}  // namespace echo::model
