// Llama forward pass in fp32 (Eigen + OpenMP) over one causal window, with every attention and MLP
// output combined by a TensorParallel all-reduce.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "echo/model/config.h"
#include "echo/model/gguf.h"
#include "echo/model/tensor_parallel.h"
#include "echo/model/tokenizer.h"
#include "echo/model/weights.h"
#include "echo/status.h"

namespace echo::model {

class LlamaModel {
 public:
  // Reads the GGUF file, its configuration, tokenizer and (dequantized) weights.
  Status load(const std::string& path);

  const LlamaConfig& config() const { return config_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const LlamaWeights& weights() const { return weights_; }

  // logits[t, v] for tokens at positions 0 .. T-1 (one causal window). tp.begin_pass() is called
  // first, so compensator state never crosses windows. observer may be nullptr.
  Status forward(const std::vector<std::int32_t>& tokens, TensorParallel& tp, Matrix* logits,
                 SiteObserver* observer = nullptr) const;

 private:
  LlamaConfig config_;
  Tokenizer tokenizer_;
  LlamaWeights weights_;
};

}  // namespace echo::model
