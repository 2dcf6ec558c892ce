// Hyperparameters of a Llama-architecture model, read from GGUF metadata (llama.* keys).
#pragma once

#include <string>

#include "echo/model/gguf.h"
#include "echo/status.h"

namespace echo::model {

struct LlamaConfig {
  std::string name;        // general.name
  int num_layers = 0;      // llama.block_count
  int hidden = 0;          // llama.embedding_length
  int ffn_hidden = 0;      // llama.feed_forward_length
  int num_heads = 0;       // llama.attention.head_count
  int num_kv_heads = 0;    // llama.attention.head_count_kv
  int head_dim = 0;        // hidden / num_heads
  int rope_dims = 0;       // llama.rope.dimension_count (defaults to head_dim)
  int context_length = 0;  // llama.context_length
  int vocab_size = 0;      // rows of token_embd.weight
  float rope_base = 10000.0f;  // llama.rope.freq_base
  float rms_eps = 1e-5f;       // llama.attention.layer_norm_rms_epsilon
  bool tied_embeddings = false;  // no output.weight: the head reuses token_embd.weight

  // Two all-reduce sites per layer: attention output, then MLP output.
  int num_sites() const { return 2 * num_layers; }
};

// Reads and validates the configuration; the status names the offending key.
Status read_llama_config(const GgufFile& file, LlamaConfig* config);

}  // namespace echo::model
