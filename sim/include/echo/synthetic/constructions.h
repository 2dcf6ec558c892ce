// The networks of Proposition 2 (Appendix A.6), on the clean ray z_k = sqrt(d) sigma_k e0 with
// the scale path sigma_k^2 = sigma_0^2 + k Delta.
#pragma once

#include <cstdint>

#include "echo/synthetic/residual_network.h"

namespace echo::synthetic {

struct RayPath {
  std::size_t dimension = 16;
  std::size_t depth = 64;
  double sigma0 = 1.0;
  double delta = 1.0;  // Delta: the energy every block adds
  double sigma(std::size_t k) const;
};

// A pre-norm network that satisfies Assumption 1 by construction: F_k(x) = s R_k n(x) with
// n(x) = x / rms(x) (RMSNorm) and R_k = Q_k Omega Q_k^T, Omega the block-diagonal quarter turn and
// Q_k a random orthogonal matrix. R_k is orthogonal and skew, so F_k(x) is orthogonal to x: every
// site adds exactly s^2 to sigma^2 (R1), ||J_k||_F^2 / d <= s^2 / sigma_k^2 (R2 with C0 = 1), and
// <v, J_k v> = -(s/sigma_k) <v, R n><n, v>/d is small, so deviations grow at the rate of the
// hidden state (Eq. 24 with small eps_k). The curvature of n gives R3.
class RotationNetwork final : public ResidualNetwork {
 public:
  RotationNetwork(std::size_t dimension, std::size_t depth, double scale, std::uint64_t seed);
  std::size_t dimension() const override { return dimension_; }
  std::size_t depth() const override { return rotations_.size(); }
  Eigen::VectorXd initial_state() const override { return initial_; }
  Eigen::VectorXd block(std::size_t k, const Eigen::VectorXd& z) const override;
  Eigen::MatrixXd jvp(std::size_t k, const Eigen::VectorXd& z, const Eigen::MatrixXd& v) const override;

 private:
  std::size_t dimension_;
  double scale_;
  std::vector<Eigen::MatrixXd> rotations_;
  Eigen::VectorXd initial_;
};

// (a) F_k(x) = (c / sigma_k) e e^T x + sqrt(d) (sigma_{k+1} - sigma_k) e0 with e = e1: the
// direction e is stretched by 1 + c / sigma_k at every site.
class AmplifyingNetwork final : public ResidualNetwork {
 public:
  AmplifyingNetwork(const RayPath& path, double c) : path_(path), c_(c) {}
  std::size_t dimension() const override { return path_.dimension; }
  std::size_t depth() const override { return path_.depth; }
  Eigen::VectorXd initial_state() const override;
  Eigen::VectorXd block(std::size_t k, const Eigen::VectorXd& z) const override;
  Eigen::MatrixXd jvp(std::size_t k, const Eigen::VectorXd& z, const Eigen::MatrixXd& v) const override;

 private:
  RayPath path_;
  double c_;
};

// (b) F_k(x) = b_k n(x) + (h/2) sqrt(d) ||Pi n(x)||^2 f with n(x) = x / ||x||, Pi = I - e0 e0^T,
// b_k = sqrt(d) (sigma_{k+1} - sigma_k), f = e1: first-order growth exactly at the rate of the
// hidden state, and a curvature whose responses add up coherently along f.
class SecondOrderNetwork final : public ResidualNetwork {
 public:
  SecondOrderNetwork(const RayPath& path, double h) : path_(path), h_(h) {}
  std::size_t dimension() const override { return path_.dimension; }
  std::size_t depth() const override { return path_.depth; }
  Eigen::VectorXd initial_state() const override;
  Eigen::VectorXd block(std::size_t k, const Eigen::VectorXd& z) const override;
  Eigen::MatrixXd jvp(std::size_t k, const Eigen::VectorXd& z, const Eigen::MatrixXd& v) const override;

 private:
  RayPath path_;
  double h_;
};

}  // namespace echo::synthetic
