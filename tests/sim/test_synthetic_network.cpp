// The synthetic networks: partial contributions add up to the block, Jacobian-vector products
// agree with central differences, the constructions have the properties the proofs use, and the
// emitted trace reads back.
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <string>
#include <unistd.h>

#include "echo/ema_kernel.h"
#include "echo/synthetic/constructions.h"
#include "echo/synthetic/prenorm_network.h"
#include "echo/synthetic/network_run.h"
#include "echo/synthetic/random.h"
#include "echo/trace.h"

using namespace echo;
using namespace echo::synthetic;

namespace {
// Partial sums re-add the same products in another order: float64 rounding of ~hidden terms.
constexpr double kSumTol = 1e-12;
// Central differences with step h: truncation O(h^2 * curvature) ~ 1e-8 at h = 1e-4, plus
// cancellation eps / h ~ 2e-12; 1e-6 relative leaves a wide margin for curvature ~ 1 / sigma^2.
constexpr double kDifferenceTol = 1e-6;
constexpr double kStep = 1e-4;

double jvp_error(const ResidualNetwork& net, std::size_t k, const Eigen::VectorXd& z) {
  Random rng(17);
  const Eigen::VectorXd v = rng.normal_matrix(z.size(), 1, 1.0);
  const Eigen::VectorXd fd = (net.block(k, z + kStep * v) - net.block(k, z - kStep * v)) / (2 * kStep);
  const Eigen::VectorXd an = net.jvp(k, z, v);
  return (fd - an).norm() / std::max(1e-12, an.norm());
}

PreNormConfig small_config(bool attention) {
  PreNormConfig c;
  c.depth = 6;
  c.width = 16;
  c.tokens = 3;
  c.ranks = 4;
  c.attention = attention;
  return c;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(synthetic_network)

BOOST_AUTO_TEST_CASE(partials_add_up_to_the_block) {
  const PreNormNetwork net(small_config(true));
  const Eigen::VectorXd z = net.initial_state(0);
  for (std::size_t k = 0; k < 2; ++k) {
    const auto parts = net.partials(k, z);
    BOOST_TEST(parts.size() == 4u);
    Eigen::VectorXd sum = Eigen::VectorXd::Zero(z.size());
    int nonzero = 0;
    for (const auto& p : parts) {
      sum += p;
      nonzero += p.norm() > 0.0 ? 1 : 0;
    }
    BOOST_TEST(nonzero == 4);  // every rank holds a share
    BOOST_TEST((sum - net.block(k, z)).norm() <= kSumTol * sum.norm());
    BOOST_TEST(sum.norm() > 0.0);
  }
}

BOOST_AUTO_TEST_CASE(mlp_jvp_matches_differences) {
  const PreNormNetwork net(small_config(false));
  BOOST_TEST(jvp_error(net, 1, net.initial_state(0)) <= kDifferenceTol);
}

BOOST_AUTO_TEST_CASE(constructions_jvp_and_ray) {
  RayPath path;
  path.dimension = 8;
  path.depth = 10;
  const AmplifyingNetwork amp(path, 1.0);
  const SecondOrderNetwork second(path, 1.0);
  for (const ResidualNetwork* net : {static_cast<const ResidualNetwork*>(&amp), static_cast<const ResidualNetwork*>(&second)}) {
    const auto z = clean_trajectory(*net);
    // The clean run stays on the ray with sigma_k^2 = sigma_0^2 + k Delta.
    for (std::size_t k = 0; k <= path.depth; ++k) BOOST_TEST(std::abs(rms(z[k]) - path.sigma(k)) <= 1e-12 * path.sigma(k));
    Random rng(2);
    const Eigen::VectorXd off = z[3] + 0.1 * rng.normal_matrix(8, 1, 1.0);
    BOOST_TEST(jvp_error(*net, 3, off) <= kDifferenceTol);
  }
}

BOOST_AUTO_TEST_CASE(rotation_blocks_add_exactly_s_squared) {
  const RotationNetwork net(16, 20, 1.0, 3);
  const auto z = clean_trajectory(net);
  for (std::size_t k = 0; k < 20; ++k) {
    const double grow = rms(z[k + 1]) * rms(z[k + 1]) - rms(z[k]) * rms(z[k]);
    BOOST_TEST(std::abs(grow - 1.0) <= 1e-10);  // F_k(z) is orthogonal to z with rms s = 1
  }
  BOOST_TEST(jvp_error(net, 4, z[4]) <= kDifferenceTol);
}

BOOST_AUTO_TEST_CASE(network_run_measures_a_nonzero_deviation) {
  const PreNormNetwork net(small_config(true));
  AllReduceSpec spec;
  spec.dtype = DType::kFloat32;
  spec.quant.group = 16;
  NetworkRun run;
  BOOST_TEST(run_network(net, spec, 2, &run).ok());
  BOOST_TEST(run.q > 0.0);
  BOOST_TEST(run.deviation.back() > 0.0);
  BOOST_TEST(run.max_partial_sum <= EmaKernel::from(spec.compensator).partial_sum_bound(net.depth(), run.q) * (1 + 1e-5));
}

BOOST_AUTO_TEST_CASE(emitted_trace_reads_back) {
  const PreNormNetwork net(small_config(true));
  const std::string path = std::string(ECHO_BINARY_DIR) + "/test_emit_" + std::to_string(getpid()) + ".h5";
  BOOST_REQUIRE(write_network_trace(net, DType::kFloat32, 2, path).ok());
  TraceReader trace;
  BOOST_REQUIRE(trace.open(path).ok());
  BOOST_TEST(trace.info().sites == net.depth());
  BOOST_TEST(trace.info().ranks == 4);
  BOOST_TEST(trace.info().has_hidden_states);
  std::vector<float> site(trace.info().count * 4);
  BOOST_TEST(trace.read_site(1, 0, site.data()).ok());
  const auto parts = net.partials(0, net.initial_state(1));
  BOOST_TEST(site[5] == static_cast<float>(parts[0](5)));  // fp32 contributions stored exactly
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_SUITE_END()
