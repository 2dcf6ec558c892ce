#include "echo/synthetic/random.h"

#include <cmath>

namespace echo::synthetic {

std::uint64_t Random::next_u64() {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Random::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Random::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // 1 - uniform() lies in (0, 1], so the logarithm is finite.
  const double r = std::sqrt(-2.0 * std::log(1.0 - uniform()));
  const double t = 2.0 * M_PI * uniform();
  spare_ = r * std::sin(t);
  has_spare_ = true;
  return r * std::cos(t);
}

Eigen::MatrixXd Random::normal_matrix(Eigen::Index rows, Eigen::Index cols, double stddev) {
  Eigen::MatrixXd m(rows, cols);
  for (Eigen::Index j = 0; j < cols; ++j)
    for (Eigen::Index i = 0; i < rows; ++i) m(i, j) = stddev * normal();
  return m;
}

Eigen::VectorXd Random::on_sphere(Eigen::Index d, double radius) {
  Eigen::VectorXd v = normal_matrix(d, 1, 1.0);
  return v * (radius / v.norm());
}

}  // namespace echo::synthetic
