// libFuzzer target: arbitrary bytes through the GGUF reader, the Llama configuration, the
// tokenizer loader and the dequantizer. Any crash, sanitizer report or leak is a bug; statuses
// are the expected outcome for malformed input.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "echo/model/config.h"
#include "echo/model/dequantize.h"
#include "echo/model/gguf.h"
#include "echo/model/tokenizer.h"

namespace {

// Bounds the work per input so the fuzzer explores formats rather than dequantizing huge tensors.
constexpr std::size_t kMaxDequantizedValues = 1 << 16;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  echo::model::GgufFile file;
  if (!file.parse(std::vector<std::uint8_t>(data, data + size), "fuzz.gguf").ok()) return 0;
  for (const echo::model::GgufTensorInfo& tensor : file.tensors()) {
    if (tensor.num_elements > kMaxDequantizedValues) continue;
    std::vector<float> values(tensor.num_elements);
    (void)echo::model::dequantize(tensor.type, file.tensor_data(tensor), tensor.num_bytes,
                                  tensor.num_elements, values.data());
  }
  echo::model::LlamaConfig config;
  (void)echo::model::read_llama_config(file, &config);
  echo::model::Tokenizer tokenizer;
  if (tokenizer.load(file).ok()) {
    std::vector<std::int32_t> ids;
    if (tokenizer.encode("Call me Ishmael 1851 <|im_end|>", &ids).ok()) (void)tokenizer.decode(ids);
  }
  return 0;
}
