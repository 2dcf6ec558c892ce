// A residual stream z_{k+1} = z_k + F_k(z_k) of N sites (Eq. 14), its state flattened into one
// vector of dimension d. The interface the theory checks and the first-order propagation use.
#pragma once

#include <cstddef>
#include <vector>

#include <Eigen/Dense>

namespace echo::synthetic {

class ResidualNetwork {
 public:
  virtual ~ResidualNetwork() = default;
  virtual std::size_t dimension() const = 0;  // d
  virtual std::size_t depth() const = 0;      // N, the number of sites
  virtual Eigen::VectorXd initial_state() const = 0;  // z_0
  // F_k(z).
  virtual Eigen::VectorXd block(std::size_t k, const Eigen::VectorXd& z) const = 0;
  // J_k V: the Jacobian of F_k at z applied to every column of V.
  virtual Eigen::MatrixXd jvp(std::size_t k, const Eigen::VectorXd& z,
                              const Eigen::MatrixXd& v) const = 0;
};

// z_0 .. z_N of the clean (exact all-reduce) run.
std::vector<Eigen::VectorXd> clean_trajectory(const ResidualNetwork& net);

// sigma = ||z|| / sqrt(d), the root-mean-square entry of a hidden state.
double rms(const Eigen::VectorXd& z);

}  // namespace echo::synthetic
