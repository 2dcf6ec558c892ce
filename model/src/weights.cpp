#include "echo/model/weights.h"

#include <string>

#include "echo/model/dequantize.h"

namespace echo::model {
namespace {

// Dequantizes the named tensor, which must have exactly the given dims (ne0 first).
Status load_tensor(const GgufFile& file, const std::string& name, std::int64_t ne0,
                   std::int64_t ne1, float* out) {
  const GgufTensorInfo* tensor = file.find_tensor(name);
  if (tensor == nullptr) {
    return Status(StatusCode::kFormatError, "GGUF " + file.name() + ": tensor " + name +
                                                " is missing");
  }
  const bool is_vector = ne1 == 0;
  const bool shape_ok = is_vector ? (tensor->num_dims == 1 && tensor->dims[0] == ne0)
                                  : (tensor->num_dims == 2 && tensor->dims[0] == ne0 &&
                                     tensor->dims[1] == ne1);
  if (!shape_ok) {
    std::string shape;
    for (int d = 0; d < tensor->num_dims; ++d) {
      shape += (d ? ", " : "") + std::to_string(tensor->dims[d]);
    }
    return Status(StatusCode::kFormatError,
                  "GGUF " + file.name() + ": tensor " + name + " has shape [" + shape +
                      "], expected [" + std::to_string(ne0) +
                      (is_vector ? "" : ", " + std::to_string(ne1)) + "]");
  }
  Status status = dequantize(tensor->type, file.tensor_data(*tensor), tensor->num_bytes,
                             tensor->num_elements, out);
  if (!status.ok()) {
    return Status(status.code(), "GGUF " + file.name() + ": tensor " + name + ": " +
                                     status.message());
  }
  return Status::Ok();
}

Status load_matrix(const GgufFile& file, const std::string& name, int rows, int cols,
                   Matrix* out) {
  out->resize(rows, cols);
  return load_tensor(file, name, cols, rows, out->data());
}

Status load_vector(const GgufFile& file, const std::string& name, int size, Vector* out) {
  out->resize(size);
  return load_tensor(file, name, size, 0, out->data());
}

}  // namespace

Status load_llama_weights(const GgufFile& file, const LlamaConfig& c, LlamaWeights* w) {
  const int q_dim = c.num_heads * c.head_dim;
  const int kv_dim = c.num_kv_heads * c.head_dim;
  Status status = load_matrix(file, "token_embd.weight", c.vocab_size, c.hidden,
                              &w->token_embedding);
  if (!status.ok()) return status;
  if (!(status = load_vector(file, "output_norm.weight", c.hidden, &w->output_norm)).ok()) {
    return status;
  }
  w->output.resize(0, 0);
  if (!c.tied_embeddings) {
    status = load_matrix(file, "output.weight", c.vocab_size, c.hidden, &w->output);
    if (!status.ok()) return status;
  }
  w->layers.assign(static_cast<std::size_t>(c.num_layers), LayerWeights{});
  for (int l = 0; l < c.num_layers; ++l) {
    LayerWeights& layer = w->layers[static_cast<std::size_t>(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    const struct {
      const char* suffix;
      int rows, cols;
      Matrix* out;
    } matrices[] = {
        {"attn_q.weight", q_dim, c.hidden, &layer.wq},
        {"attn_k.weight", kv_dim, c.hidden, &layer.wk},
        {"attn_v.weight", kv_dim, c.hidden, &layer.wv},
        {"attn_output.weight", c.hidden, q_dim, &layer.wo},
        {"ffn_gate.weight", c.ffn_hidden, c.hidden, &layer.w_gate},
        {"ffn_up.weight", c.ffn_hidden, c.hidden, &layer.w_up},
        {"ffn_down.weight", c.hidden, c.ffn_hidden, &layer.w_down},
    };
    for (const auto& m : matrices) {
      if (!(status = load_matrix(file, p + m.suffix, m.rows, m.cols, m.out)).ok()) return status;
    }
    if (!(status = load_vector(file, p + "attn_norm.weight", c.hidden, &layer.attn_norm)).ok()) {
      return status;
    }
    if (!(status = load_vector(file, p + "ffn_norm.weight", c.hidden, &layer.ffn_norm)).ok()) {
      return status;
    }
  }
  return Status::Ok();
}

}  // namespace echo::model
