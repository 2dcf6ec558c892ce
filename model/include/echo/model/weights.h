// fp32 weights of a Llama model, dequantized once from GGUF tensors. Linear weights keep the
// GGUF layout [out_features, in_features] (row-major), so y = x W^T.
#pragma once

#include <vector>

#include <Eigen/Core>

#include "echo/model/config.h"
#include "echo/model/gguf.h"
#include "echo/status.h"

namespace echo::model {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::VectorXf;

struct LayerWeights {
  Vector attn_norm;  // [hidden]
  Matrix wq;         // [heads * head_dim, hidden]
  Matrix wk;         // [kv_heads * head_dim, hidden]
  Matrix wv;         // [kv_heads * head_dim, hidden]
  Matrix wo;         // [hidden, heads * head_dim]
  Vector ffn_norm;   // [hidden]
  Matrix w_gate;     // [ffn_hidden, hidden]
  Matrix w_up;       // [ffn_hidden, hidden]
  Matrix w_down;     // [hidden, ffn_hidden]
};

struct LlamaWeights {
  Matrix token_embedding;  // [vocab, hidden]
  Vector output_norm;      // [hidden]
  Matrix output;           // [vocab, hidden]; empty when tied to token_embedding
  std::vector<LayerWeights> layers;

  const Matrix& head() const { return output.size() == 0 ? token_embedding : output; }
};

// Dequantizes every tensor the forward pass needs, checking each shape against config.
Status load_llama_weights(const GgufFile& file, const LlamaConfig& config, LlamaWeights* weights);

}  // namespace echo::model
