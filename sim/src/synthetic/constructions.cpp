#include "echo/synthetic/constructions.h"

#include <cmath>

#include "echo/synthetic/random.h"

namespace echo::synthetic {

double RayPath::sigma(std::size_t k) const {
  return std::sqrt(sigma0 * sigma0 + static_cast<double>(k) * delta);
}

namespace {
Eigen::VectorXd ray_start(const RayPath& path) {
  Eigen::VectorXd z = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(path.dimension));
  z(0) = std::sqrt(static_cast<double>(path.dimension)) * path.sigma0;
  return z;
}
double ray_step(const RayPath& path, std::size_t k) {
  return std::sqrt(static_cast<double>(path.dimension)) * (path.sigma(k + 1) - path.sigma(k));
}
}  // namespace

RotationNetwork::RotationNetwork(std::size_t dimension, std::size_t depth, double scale,
                                 std::uint64_t seed)
    : dimension_(dimension), scale_(scale) {
  Random rng(seed);
  const auto d = static_cast<Eigen::Index>(dimension);
  Eigen::MatrixXd omega = Eigen::MatrixXd::Zero(d, d);
  for (Eigen::Index i = 0; i + 1 < d; i += 2) {
    omega(i, i + 1) = -1.0;
    omega(i + 1, i) = 1.0;
  }
  for (std::size_t k = 0; k < depth; ++k) {
    const Eigen::HouseholderQR<Eigen::MatrixXd> qr(rng.normal_matrix(d, d, 1.0));
    const Eigen::MatrixXd q = qr.householderQ();
    rotations_.push_back(q * omega * q.transpose());
  }
  initial_ = rng.normal_matrix(d, 1, 1.0);
  initial_ /= rms(initial_);  // sigma_0 = 1
}

Eigen::VectorXd RotationNetwork::block(std::size_t k, const Eigen::VectorXd& z) const {
  return scale_ * (rotations_[k] * (z / rms(z)));
}

Eigen::MatrixXd RotationNetwork::jvp(std::size_t k, const Eigen::VectorXd& z,
                                     const Eigen::MatrixXd& v) const {
  const double r = rms(z);
  const Eigen::VectorXd n = z / r;
  const Eigen::MatrixXd dn = (v - n * (n.transpose() * v) / static_cast<double>(z.size())) / r;
  return scale_ * (rotations_[k] * dn);
}

Eigen::VectorXd AmplifyingNetwork::initial_state() const { return ray_start(path_); }

Eigen::VectorXd AmplifyingNetwork::block(std::size_t k, const Eigen::VectorXd& z) const {
  Eigen::VectorXd out = Eigen::VectorXd::Zero(z.size());
  out(1) = c_ / path_.sigma(k) * z(1);
  out(0) += ray_step(path_, k);
  return out;
}

Eigen::MatrixXd AmplifyingNetwork::jvp(std::size_t k, const Eigen::VectorXd&,
                                       const Eigen::MatrixXd& v) const {
  Eigen::MatrixXd out = Eigen::MatrixXd::Zero(v.rows(), v.cols());
  out.row(1) = c_ / path_.sigma(k) * v.row(1);
  return out;
}

Eigen::VectorXd SecondOrderNetwork::initial_state() const { return ray_start(path_); }

Eigen::VectorXd SecondOrderNetwork::block(std::size_t k, const Eigen::VectorXd& z) const {
  const Eigen::VectorXd n = z / z.norm();
  const double off_ray = n.squaredNorm() - n(0) * n(0);  // ||Pi n||^2
  Eigen::VectorXd out = ray_step(path_, k) * n;
  out(1) += 0.5 * h_ * std::sqrt(static_cast<double>(path_.dimension)) * off_ray;
  return out;
}

Eigen::MatrixXd SecondOrderNetwork::jvp(std::size_t k, const Eigen::VectorXd& z,
                                        const Eigen::MatrixXd& v) const {
  // dn = (I - n n^T) v / ||z||; the quadratic term's derivative 2 <Pi n, Pi dn> vanishes on the
  // ray and is kept for points off it.
  const double norm = z.norm();
  const Eigen::VectorXd n = z / norm;
  const Eigen::MatrixXd dn = (v - n * (n.transpose() * v)) / norm;
  Eigen::MatrixXd out = ray_step(path_, k) * dn;
  Eigen::VectorXd pin = n;
  pin(0) = 0.0;
  out.row(1) += h_ * std::sqrt(static_cast<double>(path_.dimension)) * (pin.transpose() * dn);
  return out;
}

}  // namespace echo::synthetic
