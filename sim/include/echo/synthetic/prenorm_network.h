// A synthetic pre-norm transformer residual stream (Eigen, float64): every site applies RMSNorm
// per token and then an MLP or an attention block, whose output is split into P partial
// contributions the way tensor parallelism splits it (MLP hidden units, attention heads).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "echo/synthetic/residual_network.h"

namespace echo::synthetic {

enum class BlockKind : std::int8_t { kAttention = 0, kMlp = 1 };  // the trace's site_kind codes

struct PreNormConfig {
  std::size_t depth = 56;         // N sites
  std::size_t width = 64;         // model width per token
  std::size_t tokens = 8;
  std::size_t ranks = 4;          // P partial contributions per site
  std::size_t heads = 4;          // attention heads, dealt to ranks in contiguous groups
  std::size_t mlp_ratio = 4;      // hidden units = mlp_ratio * width, dealt to ranks likewise
  bool attention = true;          // alternate attention / MLP sites; false: MLP only
  double output_scale = 1.0;      // rms of a block output, so sigma_k^2 grows by about its square
  double input_scale = 1.0;       // rms of z_0
  std::uint64_t seed = 1;
};

class PreNormNetwork final : public ResidualNetwork {
 public:
  explicit PreNormNetwork(const PreNormConfig& config);

  std::size_t dimension() const override { return config_.tokens * config_.width; }
  std::size_t depth() const override { return config_.depth; }
  Eigen::VectorXd initial_state() const override { return initial_state(0); }
  Eigen::VectorXd block(std::size_t k, const Eigen::VectorXd& z) const override;
  // Analytic for MLP sites, central differences for attention sites.
  Eigen::MatrixXd jvp(std::size_t k, const Eigen::VectorXd& z,
                      const Eigen::MatrixXd& v) const override;

  const PreNormConfig& config() const { return config_; }
  BlockKind kind(std::size_t k) const;
  // z_0 of input number `input` (one per simulated pass).
  Eigen::VectorXd initial_state(std::size_t input) const;
  // The P partial contributions of site k at z; they add up to block(k, z).
  std::vector<Eigen::VectorXd> partials(std::size_t k, const Eigen::VectorXd& z) const;

 private:
  struct Mlp {
    Eigen::MatrixXd w1;  // hidden x width
    Eigen::MatrixXd w2;  // width x hidden
  };
  struct Attention {
    std::vector<Eigen::MatrixXd> wq, wk, wv, wo;  // per head: width x dh (wo: dh x width)
  };
  std::vector<Eigen::VectorXd> mlp_partials(const Mlp& mlp, const Eigen::MatrixXd& normed) const;
  std::vector<Eigen::VectorXd> attention_partials(const Attention& att,
                                                  const Eigen::MatrixXd& normed) const;
  Eigen::MatrixXd normalize(const Eigen::VectorXd& z) const;  // tokens x width

  PreNormConfig config_;
  std::vector<Mlp> mlps_;             // indexed by site (empty at attention sites)
  std::vector<Attention> attentions_; // indexed by site (empty at MLP sites)
};

}  // namespace echo::synthetic
