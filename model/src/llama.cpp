#include "echo/model/llama.h"

#include <string>

#include "layers.h"

namespace echo::model {

Status LlamaModel::load(const std::string& path) {
  GgufFile file;
  Status status = file.open(path);
  if (!status.ok()) return status;
  if (!(status = read_llama_config(file, &config_)).ok()) return status;
  if (!(status = tokenizer_.load(file)).ok()) return status;
  if (tokenizer_.vocab_size() != config_.vocab_size) {
    return Status(StatusCode::kFormatError,
                  "GGUF " + path + ": the tokenizer has " +
                      std::to_string(tokenizer_.vocab_size()) + " tokens, the embedding " +
                      std::to_string(config_.vocab_size) + " rows");
  }
  return load_llama_weights(file, config_, &weights_);
}

Status LlamaModel::forward(const std::vector<std::int32_t>& tokens, TensorParallel& tp,
                           Matrix* logits, SiteObserver* observer) const {
  const auto num_tokens = static_cast<Eigen::Index>(tokens.size());
  if (num_tokens == 0 || num_tokens > config_.context_length) {
    return Status(StatusCode::kInvalidArgument,
                  "forward: window of " + std::to_string(num_tokens) +
                      " tokens (must be 1 .. " + std::to_string(config_.context_length) + ")");
  }
  Matrix hidden(num_tokens, config_.hidden);
  for (Eigen::Index t = 0; t < num_tokens; ++t) {
    const std::int32_t id = tokens[static_cast<std::size_t>(t)];
    if (id < 0 || id >= config_.vocab_size) {
      return Status(StatusCode::kInvalidArgument,
                    "forward: token id " + std::to_string(id) + " outside the vocabulary");
    }
    hidden.row(t) = weights_.token_embedding.row(id);
  }
  tp.begin_pass();
  if (observer != nullptr) observer->on_hidden(0, hidden);

  Matrix normed, q, k, v, mixed, gate, up, reduced;
  for (int l = 0; l < config_.num_layers; ++l) {
    const LayerWeights& layer = weights_.layers[static_cast<std::size_t>(l)];
    const int attention_site = 2 * l;
    const int mlp_site = 2 * l + 1;

    rms_norm(hidden, layer.attn_norm, config_.rms_eps, &normed);
    q.noalias() = normed * layer.wq.transpose();
    k.noalias() = normed * layer.wk.transpose();
    v.noalias() = normed * layer.wv.transpose();
    apply_rope(config_, config_.num_heads, &q);
    apply_rope(config_, config_.num_kv_heads, &k);
    causal_attention(config_, q, k, v, &mixed);
    Status status = tp.reduce(attention_site, SiteKind::kAttention, mixed, layer.wo, &reduced,
                              observer);
    if (!status.ok()) return status;
    hidden += reduced;
    if (observer != nullptr) observer->on_hidden(attention_site + 1, hidden);

    rms_norm(hidden, layer.ffn_norm, config_.rms_eps, &normed);
    gate.noalias() = normed * layer.w_gate.transpose();
    up.noalias() = normed * layer.w_up.transpose();
    swiglu(gate, up, &mixed);
    status = tp.reduce(mlp_site, SiteKind::kMlp, mixed, layer.w_down, &reduced, observer);
    if (!status.ok()) return status;
    hidden += reduced;
    if (observer != nullptr) observer->on_hidden(mlp_site + 1, hidden);
  }
  rms_norm(hidden, weights_.output_norm, config_.rms_eps, &normed);
  logits->noalias() = normed * weights_.head().transpose();
  return Status::Ok();
}

}  // namespace echo::model
