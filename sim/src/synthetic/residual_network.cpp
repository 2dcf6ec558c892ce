#include "echo/synthetic/residual_network.h"

#include <cmath>

namespace echo::synthetic {

std::vector<Eigen::VectorXd> clean_trajectory(const ResidualNetwork& net) {
  std::vector<Eigen::VectorXd> z;
  z.reserve(net.depth() + 1);
  z.push_back(net.initial_state());
  for (std::size_t k = 0; k < net.depth(); ++k) z.push_back(z.back() + net.block(k, z.back()));
  return z;
}

double rms(const Eigen::VectorXd& z) {
  return z.norm() / std::sqrt(static_cast<double>(z.size()));
}

}  // namespace echo::synthetic
