#include "echo/model/config.h"

#include <string>

namespace echo::model {
namespace {

// Sizes beyond these are not a Llama model this code can hold in memory.
constexpr std::int64_t kMaxDimension = 1 << 20;

Status read_int(const GgufFile& file, const char* key, int* out) {
  std::int64_t value = 0;
  Status status = file.get_integer(key, &value);
  if (!status.ok()) return status;
  if (value <= 0 || value > kMaxDimension) {
    return Status(StatusCode::kFormatError, "GGUF " + file.name() + ": metadata " + key + " = " +
                                                std::to_string(value) + " is out of range");
  }
  *out = static_cast<int>(value);
  return Status::Ok();
}

Status invalid(const GgufFile& file, const std::string& what) {
  return Status(StatusCode::kFormatError, "GGUF " + file.name() + ": " + what);
}

}  // namespace

Status read_llama_config(const GgufFile& file, LlamaConfig* config) {
  std::string architecture;
  Status status = file.get_string("general.architecture", &architecture);
  if (!status.ok()) return status;
  if (architecture != "llama") {
    return Status(StatusCode::kUnsupported, "GGUF " + file.name() + ": architecture " +
                                                architecture + " (only llama is supported)");
  }
  LlamaConfig c;
  if (file.find("general.name")) file.get_string("general.name", &c.name);
  if (!(status = read_int(file, "llama.block_count", &c.num_layers)).ok()) return status;
  if (!(status = read_int(file, "llama.embedding_length", &c.hidden)).ok()) return status;
  if (!(status = read_int(file, "llama.feed_forward_length", &c.ffn_hidden)).ok()) return status;
  if (!(status = read_int(file, "llama.attention.head_count", &c.num_heads)).ok()) return status;
  if (!(status = read_int(file, "llama.attention.head_count_kv", &c.num_kv_heads)).ok()) {
    return status;
  }
  if (!(status = read_int(file, "llama.context_length", &c.context_length)).ok()) return status;
  if (c.hidden % c.num_heads != 0) {
    return invalid(file, "embedding_length is not a multiple of head_count");
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return invalid(file, "head_count is not a multiple of head_count_kv");
  }
  c.head_dim = c.hidden / c.num_heads;
  c.rope_dims = c.head_dim;
  if (file.find("llama.rope.dimension_count")) {
    if (!(status = read_int(file, "llama.rope.dimension_count", &c.rope_dims)).ok()) return status;
  }
  if (c.rope_dims > c.head_dim || c.rope_dims % 2 != 0) {
    return invalid(file, "llama.rope.dimension_count must be even and at most the head size");
  }
  double value = 0;
  if (file.find("llama.rope.freq_base")) {
    if (!(status = file.get_float("llama.rope.freq_base", &value)).ok()) return status;
    if (!(value > 1.0)) return invalid(file, "llama.rope.freq_base must exceed 1");
    c.rope_base = static_cast<float>(value);
  }
  if (!(status = file.get_float("llama.attention.layer_norm_rms_epsilon", &value)).ok()) {
    return status;
  }
  if (!(value > 0.0 && value < 1.0)) {
    return invalid(file, "llama.attention.layer_norm_rms_epsilon must lie in (0, 1)");
  }
  c.rms_eps = static_cast<float>(value);
  if (file.find("llama.rope.scaling.type")) {
    std::string scaling;
    file.get_string("llama.rope.scaling.type", &scaling);
    if (scaling != "none") return Status(StatusCode::kUnsupported, "RoPE scaling " + scaling);
  }
  const GgufTensorInfo* embedding = file.find_tensor("token_embd.weight");
  if (embedding == nullptr) return invalid(file, "tensor token_embd.weight is missing");
  if (embedding->num_dims != 2 || embedding->dims[0] != c.hidden ||
      embedding->dims[1] > kMaxDimension) {
    return invalid(file, "tensor token_embd.weight is not [embedding_length, vocab]");
  }
  c.vocab_size = static_cast<int>(embedding->dims[1]);
  c.tied_embeddings = file.find_tensor("output.weight") == nullptr;
  *config = c;
  return Status::Ok();
}

}  // namespace echo::model
