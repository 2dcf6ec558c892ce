#include "layers.h"

#include <cmath>
#include <limits>
#include <vector>

namespace echo::model {

void rms_norm(const Matrix& x, const Vector& weight, float eps, Matrix* y) {
  y->resize(x.rows(), x.cols());
  for (Eigen::Index t = 0; t < x.rows(); ++t) {
    const float mean_square = x.row(t).squaredNorm() / static_cast<float>(x.cols());
    const float scale = 1.0f / std::sqrt(mean_square + eps);
    y->row(t) = (x.row(t) * scale).cwiseProduct(weight.transpose());
  }
}

void apply_rope(const LlamaConfig& config, int num_heads, Matrix* x) {
  const int half = config.rope_dims / 2;
  // Angles in double, so the table does not depend on the float rounding of a running product.
  std::vector<double> inv_freq(static_cast<std::size_t>(half));
  for (int i = 0; i < half; ++i) {
    inv_freq[static_cast<std::size_t>(i)] =
        std::pow(static_cast<double>(config.rope_base), -2.0 * i / config.rope_dims);
  }
#pragma omp parallel for schedule(static)
  for (Eigen::Index t = 0; t < x->rows(); ++t) {
    for (int i = 0; i < half; ++i) {
      const double angle = static_cast<double>(t) * inv_freq[static_cast<std::size_t>(i)];
      const auto c = static_cast<float>(std::cos(angle));
      const auto s = static_cast<float>(std::sin(angle));
      for (int h = 0; h < num_heads; ++h) {
        float* pair = x->row(t).data() + h * config.head_dim + 2 * i;
        const float x0 = pair[0];
        const float x1 = pair[1];
        pair[0] = x0 * c - x1 * s;
        pair[1] = x0 * s + x1 * c;
      }
    }
  }
}

void causal_attention(const LlamaConfig& config, const Matrix& q, const Matrix& k,
                      const Matrix& v, Matrix* out) {
  const Eigen::Index tokens = q.rows();
  const int d = config.head_dim;
  const int group = config.num_heads / config.num_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  out->resize(tokens, q.cols());
  // Heads are independent; Eigen keeps each head's products on its own thread inside the loop.
#pragma omp parallel for schedule(static)
  for (int h = 0; h < config.num_heads; ++h) {
    const int kv = h / group;
    Matrix scores = (q.middleCols(h * d, d) * k.middleCols(kv * d, d).transpose()) * scale;
    for (Eigen::Index t = 0; t < tokens; ++t) {
      auto row = scores.row(t);
      const float peak = row.head(t + 1).maxCoeff();
      row.head(t + 1) = (row.head(t + 1).array() - peak).exp().matrix();
      row.head(t + 1) /= row.head(t + 1).sum();
      row.tail(tokens - t - 1).setZero();  // causal mask: no weight on later positions
    }
    out->middleCols(h * d, d).noalias() = scores * v.middleCols(kv * d, d);
  }
}

void swiglu(const Matrix& gate, const Matrix& up, Matrix* out) {
  *out = (gate.array() / (1.0f + (-gate.array()).exp()) * up.array()).matrix();
}

}  // namespace echo::model
