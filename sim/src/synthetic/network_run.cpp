#include "echo/synthetic/network_run.h"

#include <algorithm>
#include <cmath>

#include "echo/trace.h"

namespace echo::synthetic {
namespace {

// The P partial contributions as float buffers, rounded to the all-reduce's dtype.
struct Contributions {
  std::vector<std::vector<float>> data;
  std::vector<const float*> inputs;
  void load(const std::vector<Eigen::VectorXd>& parts, DType dtype) {
    data.resize(parts.size());
    inputs.resize(parts.size());
    for (std::size_t r = 0; r < parts.size(); ++r) {
      data[r].resize(static_cast<std::size_t>(parts[r].size()));
      for (Eigen::Index i = 0; i < parts[r].size(); ++i) {
        data[r][static_cast<std::size_t>(i)] = round_to_dtype(static_cast<float>(parts[r](i)), dtype);
      }
      inputs[r] = data[r].data();
    }
  }
};

Eigen::VectorXd exact_step(const PreNormNetwork& net, std::size_t k, const Eigen::VectorXd& z,
                           DType dtype) {
  Contributions c;
  c.load(net.partials(k, z), dtype);
  std::vector<float> out(static_cast<std::size_t>(z.size()));
  exact_allreduce(dtype, static_cast<int>(c.inputs.size()), out.size(), c.inputs.data(), out.data());
  return Eigen::Map<const Eigen::VectorXf>(out.data(), z.size()).cast<double>();
}

}  // namespace

Status run_network(const PreNormNetwork& net, const AllReduceSpec& spec, std::size_t passes,
                   NetworkRun* run) {
  const int ranks = static_cast<int>(net.config().ranks);
  ECHO_TRY(spec.validate(ranks));
  if (net.depth() == 0 || passes == 0) {
    return Status(StatusCode::kInvalidArgument, "a network run needs at least one site and one pass (depth " +
                                                    std::to_string(net.depth()) + ", passes " + std::to_string(passes) + ")");
  }
  const std::size_t sites = net.depth();
  const auto n = static_cast<Eigen::Index>(net.dimension());
  const double d = static_cast<double>(n);
  NetworkRun r;
  r.passes = passes;
  r.injected_norm.assign(sites, 0.0);
  r.correction_norm.assign(sites, 0.0);
  r.partial_sum_norm.assign(sites, 0.0);
  r.deviation.assign(sites, 0.0);
  r.sigma.assign(sites, 0.0);
  std::vector<CompensatorState> states(static_cast<std::size_t>(ranks));
  std::vector<std::vector<float>> out(ranks, std::vector<float>(static_cast<std::size_t>(n)));
  std::vector<std::vector<float>> xp(ranks, std::vector<float>(static_cast<std::size_t>(n)));
  std::vector<float*> out_ptr(ranks), xp_ptr(ranks);
  for (int i = 0; i < ranks; ++i) {
    out_ptr[i] = out[i].data();
    xp_ptr[i] = xp[i].data();
  }
  AllReduceWorkspace workspace;
  for (std::size_t pass = 0; pass < passes; ++pass) {
    for (CompensatorState& s : states) s.reset();
    Eigen::VectorXd exact = net.initial_state(pass);
    Eigen::VectorXd quant = exact;
    Eigen::VectorXd partial = Eigen::VectorXd::Zero(n);
    for (std::size_t k = 0; k < sites; ++k) {
      exact += exact_step(net, k, exact, spec.dtype);
      Contributions c;
      c.load(net.partials(k, quant), spec.dtype);
      AllReduceReport report;
      ECHO_TRY(allreduce(spec, ranks, static_cast<std::size_t>(n), c.inputs.data(), out_ptr.data(), states.data(), xp_ptr.data(), &report, &workspace));
      // delta = y - sum x', C = sum (x' - x), rho = y - sum x, in float64 (docs/numerics.md s. 7).
      Eigen::VectorXd y(n), sx = Eigen::VectorXd::Zero(n), sxp = Eigen::VectorXd::Zero(n);
      for (Eigen::Index i = 0; i < n; ++i) {
        y(i) = static_cast<double>(out[0][static_cast<std::size_t>(i)]);
        for (int rr = 0; rr < ranks; ++rr) {
          sx(i) += static_cast<double>(c.data[rr][static_cast<std::size_t>(i)]);
          sxp(i) += static_cast<double>(xp[rr][static_cast<std::size_t>(i)]);
        }
      }
      const double delta = (y - sxp).norm();
      partial += y - sx;
      quant += y;
      const double sigma = rms(exact);
      r.q = std::max(r.q, delta);
      r.max_partial_sum = std::max(r.max_partial_sum, partial.norm());
      r.mean_injected += delta;
      r.injected_norm[k] += delta;
      r.correction_norm[k] += (sxp - sx).norm();
      r.partial_sum_norm[k] += partial.norm();
      r.deviation[k] += (quant - exact).squaredNorm() / (d * sigma * sigma);
      r.sigma[k] += sigma;
    }
  }
  const double p = static_cast<double>(passes);
  r.mean_injected /= p * static_cast<double>(sites);
  for (auto* v : {&r.injected_norm, &r.correction_norm, &r.partial_sum_norm, &r.deviation, &r.sigma}) {
    for (double& x : *v) x /= p;
  }
  *run = std::move(r);
  return Status::Ok();
}

Status write_network_trace(const PreNormNetwork& net, DType dtype, std::size_t passes,
                           const std::string& path) {
  TraceInfo info;
  info.ranks = static_cast<int>(net.config().ranks);
  info.direction = Direction::kForward;
  info.dtype = dtype;
  info.passes = passes;
  info.sites = net.depth();
  info.count = net.dimension();
  info.has_hidden_states = true;
  info.tokens = static_cast<std::int64_t>(net.config().tokens);
  info.hidden = static_cast<std::int64_t>(net.config().width);
  info.model = "synthetic pre-norm network";
  info.source = "echo::synthetic::write_network_trace, seed " + std::to_string(net.config().seed);
  for (std::size_t k = 0; k < net.depth(); ++k) info.site_kind.push_back(static_cast<std::int8_t>(net.kind(k)));
  TraceWriter writer;
  ECHO_TRY(writer.create(path, info));
  const std::size_t n = net.dimension();
  std::vector<float> site(info.count * static_cast<std::size_t>(info.ranks));
  std::vector<float> hidden((info.sites + 1) * n);
  for (std::size_t pass = 0; pass < passes; ++pass) {
    Eigen::VectorXd z = net.initial_state(pass);
    for (std::size_t i = 0; i < n; ++i) hidden[i] = static_cast<float>(z(static_cast<Eigen::Index>(i)));
    for (std::size_t k = 0; k < net.depth(); ++k) {
      const std::vector<Eigen::VectorXd> parts = net.partials(k, z);
      for (std::size_t r = 0; r < parts.size(); ++r)
        for (std::size_t i = 0; i < n; ++i)
          site[r * n + i] = round_to_dtype(static_cast<float>(parts[r](static_cast<Eigen::Index>(i))), dtype);
      ECHO_TRY(writer.write_site(pass, k, site.data()));
      z += exact_step(net, k, z, dtype);
      for (std::size_t i = 0; i < n; ++i) hidden[(k + 1) * n + i] = static_cast<float>(z(static_cast<Eigen::Index>(i)));
    }
    ECHO_TRY(writer.write_hidden_states(pass, hidden.data()));
  }
  return writer.commit();
}

}  // namespace echo::synthetic
