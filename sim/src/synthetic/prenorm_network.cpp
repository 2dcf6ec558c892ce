#include "echo/synthetic/prenorm_network.h"

#include <cmath>

#include "echo/synthetic/random.h"

namespace echo::synthetic {
namespace {

// tanh form of GELU and its derivative.
constexpr double kGeluC = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluCubic = 0.044715;
double gelu(double x) { return 0.5 * x * (1.0 + std::tanh(kGeluC * (x + kGeluCubic * x * x * x))); }
double gelu_derivative(double x) {
  const double t = std::tanh(kGeluC * (x + kGeluCubic * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kGeluC * (1.0 + 3.0 * kGeluCubic * x * x);
}

// Central-difference step for attention Jacobians, relative to the state's rms: the truncation
// error is O(h^2) and the cancellation error O(eps / h), balanced near eps^(1/3) ~ 6e-6.
constexpr double kDifferenceStep = 1e-5;

// [begin, end) of part r when `total` items are dealt to `parts` ranks in contiguous blocks.
std::pair<std::size_t, std::size_t> share(std::size_t total, std::size_t parts, std::size_t r) {
  const std::size_t per = (total + parts - 1) / parts;
  const std::size_t begin = std::min(total, r * per);
  return {begin, std::min(total, begin + per)};
}

}  // namespace

PreNormNetwork::PreNormNetwork(const PreNormConfig& config)
    : config_(config), mlps_(config.depth), attentions_(config.depth) {
  Random rng(config.seed);
  const auto width = static_cast<Eigen::Index>(config.width);
  const auto hidden = static_cast<Eigen::Index>(config.mlp_ratio * config.width);
  const std::size_t heads = std::max<std::size_t>(1, config.heads);
  const auto dh = static_cast<Eigen::Index>(std::max<std::size_t>(1, config.width / heads));
  const double in_std = 1.0 / std::sqrt(static_cast<double>(width));
  // A random unit-rms input to calibrate each block's output scale once.
  Eigen::VectorXd probe(static_cast<Eigen::Index>(dimension()));
  for (Eigen::Index i = 0; i < probe.size(); ++i) probe(i) = rng.normal();
  for (std::size_t k = 0; k < config.depth; ++k) {
    if (kind(k) == BlockKind::kMlp) {
      mlps_[k].w1 = rng.normal_matrix(hidden, width, in_std);
      mlps_[k].w2 = rng.normal_matrix(width, hidden, 1.0 / std::sqrt(static_cast<double>(hidden)));
    } else {
      Attention& att = attentions_[k];
      for (std::size_t h = 0; h < heads; ++h) {
        att.wq.push_back(rng.normal_matrix(width, dh, in_std));
        att.wk.push_back(rng.normal_matrix(width, dh, in_std));
        att.wv.push_back(rng.normal_matrix(width, dh, in_std));
        att.wo.push_back(rng.normal_matrix(dh, width, 1.0 / std::sqrt(static_cast<double>(dh * heads))));
      }
    }
    // Calibrate: the output on the probe has rms output_scale.
    const double scale = config.output_scale / rms(block(k, probe));
    if (kind(k) == BlockKind::kMlp) {
      mlps_[k].w2 *= scale;
    } else {
      for (Eigen::MatrixXd& wo : attentions_[k].wo) wo *= scale;
    }
  }
}

BlockKind PreNormNetwork::kind(std::size_t k) const {
  if (!config_.attention) return BlockKind::kMlp;
  return k % 2 == 0 ? BlockKind::kAttention : BlockKind::kMlp;
}

Eigen::VectorXd PreNormNetwork::initial_state(std::size_t input) const {
  Random rng(config_.seed ^ (0xA5A5A5A5ull + 0x9E3779B97F4A7C15ull * (input + 1)));
  Eigen::VectorXd z(static_cast<Eigen::Index>(dimension()));
  for (Eigen::Index i = 0; i < z.size(); ++i) z(i) = config_.input_scale * rng.normal();
  return z;
}

Eigen::MatrixXd PreNormNetwork::normalize(const Eigen::VectorXd& z) const {
  const auto width = static_cast<Eigen::Index>(config_.width);
  const auto tokens = static_cast<Eigen::Index>(config_.tokens);
  Eigen::MatrixXd n(tokens, width);
  for (Eigen::Index t = 0; t < tokens; ++t) {
    const Eigen::VectorXd row = z.segment(t * width, width);
    n.row(t) = (row / rms(row)).transpose();
  }
  return n;
}

std::vector<Eigen::VectorXd> PreNormNetwork::mlp_partials(const Mlp& mlp,
                                                          const Eigen::MatrixXd& normed) const {
  const auto width = static_cast<Eigen::Index>(config_.width);
  const Eigen::Index hidden = mlp.w1.rows();
  std::vector<Eigen::VectorXd> parts(config_.ranks, Eigen::VectorXd::Zero(static_cast<Eigen::Index>(dimension())));
  for (Eigen::Index t = 0; t < normed.rows(); ++t) {
    Eigen::VectorXd h = mlp.w1 * normed.row(t).transpose();
    for (Eigen::Index j = 0; j < hidden; ++j) h(j) = gelu(h(j));
    for (std::size_t r = 0; r < config_.ranks; ++r) {
      const auto [b, e] = share(static_cast<std::size_t>(hidden), config_.ranks, r);
      if (e == b) continue;
      const auto bi = static_cast<Eigen::Index>(b), len = static_cast<Eigen::Index>(e - b);
      parts[r].segment(t * width, width) = mlp.w2.middleCols(bi, len) * h.segment(bi, len);
    }
  }
  return parts;
}

std::vector<Eigen::VectorXd> PreNormNetwork::attention_partials(
    const Attention& att, const Eigen::MatrixXd& normed) const {
  const auto width = static_cast<Eigen::Index>(config_.width);
  const Eigen::Index tokens = normed.rows();
  std::vector<Eigen::VectorXd> parts(config_.ranks, Eigen::VectorXd::Zero(static_cast<Eigen::Index>(dimension())));
  const std::size_t heads = att.wq.size();
  for (std::size_t h = 0; h < heads; ++h) {
    const Eigen::MatrixXd q = normed * att.wq[h], kk = normed * att.wk[h], v = normed * att.wv[h];
    Eigen::MatrixXd scores = q * kk.transpose() / std::sqrt(static_cast<double>(q.cols()));
    for (Eigen::Index i = 0; i < tokens; ++i) {
      const double mx = scores.row(i).maxCoeff();
      scores.row(i) = (scores.row(i).array() - mx).exp().matrix();
      scores.row(i) /= scores.row(i).sum();
    }
    const Eigen::MatrixXd out = scores * v * att.wo[h];  // tokens x width
    // Head h belongs to the rank whose contiguous block of heads holds it.
    std::size_t owner = 0;
    while (share(heads, config_.ranks, owner).second <= h) ++owner;
    for (Eigen::Index t = 0; t < tokens; ++t) parts[owner].segment(t * width, width) += out.row(t).transpose();
  }
  return parts;
}

std::vector<Eigen::VectorXd> PreNormNetwork::partials(std::size_t k, const Eigen::VectorXd& z) const {
  const Eigen::MatrixXd normed = normalize(z);
  return kind(k) == BlockKind::kMlp ? mlp_partials(mlps_[k], normed)
                                    : attention_partials(attentions_[k], normed);
}

Eigen::VectorXd PreNormNetwork::block(std::size_t k, const Eigen::VectorXd& z) const {
  Eigen::VectorXd sum = Eigen::VectorXd::Zero(z.size());
  for (const Eigen::VectorXd& p : partials(k, z)) sum += p;
  return sum;
}

Eigen::MatrixXd PreNormNetwork::jvp(std::size_t k, const Eigen::VectorXd& z,
                                    const Eigen::MatrixXd& v) const {
  Eigen::MatrixXd out(v.rows(), v.cols());
  if (kind(k) == BlockKind::kAttention) {
    const double h = kDifferenceStep * rms(z);
    for (Eigen::Index c = 0; c < v.cols(); ++c) {
      out.col(c) = (block(k, z + h * v.col(c)) - block(k, z - h * v.col(c))) / (2.0 * h);
    }
    return out;
  }
  // MLP: n = x / r with r = rms(x), dn = (v - n (n . v) / width) / r; then W2 diag(gelu'(h)) W1.
  const Mlp& mlp = mlps_[k];
  const auto width = static_cast<Eigen::Index>(config_.width);
  const double w = static_cast<double>(width);
  for (Eigen::Index t = 0; t < static_cast<Eigen::Index>(config_.tokens); ++t) {
    const Eigen::VectorXd x = z.segment(t * width, width);
    const double r = rms(x);
    const Eigen::VectorXd n = x / r;
    Eigen::VectorXd slope = mlp.w1 * n;
    for (Eigen::Index j = 0; j < slope.size(); ++j) slope(j) = gelu_derivative(slope(j));
    const Eigen::MatrixXd vt = v.middleRows(t * width, width);
    const Eigen::MatrixXd dn = (vt - n * (n.transpose() * vt) / w) / r;
    out.middleRows(t * width, width) = mlp.w2 * (slope.asDiagonal() * (mlp.w1 * dn));
  }
  return out;
}

}  // namespace echo::synthetic
