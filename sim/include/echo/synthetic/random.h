// Deterministic random numbers (SplitMix64 + Box-Muller): the same draws on every platform and
// standard library, so seeded checks and synthetic networks are reproducible bit for bit.
#pragma once

#include <cstdint>

#include <Eigen/Dense>

namespace echo::synthetic {

class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next_u64();
  double uniform();   // in [0, 1), 53 random bits
  double normal();    // standard normal
  Eigen::MatrixXd normal_matrix(Eigen::Index rows, Eigen::Index cols, double stddev);
  // Uniform on the sphere of radius `radius` in R^d: mean zero, covariance radius^2 / d * I.
  Eigen::VectorXd on_sphere(Eigen::Index d, double radius);

 private:
  std::uint64_t state_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace echo::synthetic
