#include "echo/replay.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "echo/ema_kernel.h"
#include "echo/hdf5_util.h"

namespace echo {
namespace {

double norm2(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}


void write_config_attributes(H5::H5File& file, const AllReduceSpec& spec, const std::string& trace,
                             const char* backend) {
  h5::write_string_attribute(file, "trace", trace);
  h5::write_string_attribute(file, "backend", backend);
  h5::write_string_attribute(file, "dtype", dtype_name(spec.dtype));
  h5::write_string_attribute(file, "algorithm", algorithm_name(spec.algorithm));
  h5::write_string_attribute(file, "quantizer", quantizer_name(spec.quant.kind));
  h5::write_int_attribute(file, "bits", spec.quant.bits);
  h5::write_int_attribute(file, "group", spec.quant.group);
  h5::write_string_attribute(file, "compensator", compensator_mode_name(spec.compensator.mode));
  h5::write_string_attribute(file, "residual", residual_mode_name(spec.compensator.residual));
  h5::write_double_attribute(file, "eta", spec.compensator.eta);
  h5::write_double_attribute(file, "a", spec.compensator.a);
  h5::write_double_attribute(file, "beta1", spec.compensator.beta1);
  h5::write_double_attribute(file, "beta2", spec.compensator.beta2);
  h5::write_double_attribute(file, "beta", spec.compensator.beta);
  h5::write_string_attribute(file, "state_dtype", dtype_name(spec.compensator.state_dtype));
  h5::write_int_attribute(file, "exact_max_count", static_cast<std::int64_t>(spec.exact_max_count));
  h5::write_int_attribute(file, "outliers", spec.quant.outliers);
  h5::write_string_attribute(file, "overflow_groups", overflow_groups_name(spec.quant.overflow));
  h5::write_string_attribute(file, "rotation", rotation_name(spec.quant.rotation));
}

}  // namespace

Status replay_trace(const TraceReader& trace, const std::string& out_path,
                    const ReplayOptions& options, AllReduceBackend& backend,
                    ReplaySummary* summary) {
  const TraceInfo& info = trace.info();
  AllReduceSpec spec = options.spec;
  spec.dtype = options.dtype_override.value_or(info.dtype);
  spec.direction = info.direction;
  ECHO_TRY(spec.validate(info.ranks));

  const std::size_t n = info.count;
  const std::size_t ranks = static_cast<std::size_t>(info.ranks);
  ReplaySummary result;
  result.trace = info;
  result.dtype = spec.dtype;
  const EmaKernel kernel = EmaKernel::from(spec.compensator);
  result.mu_w = kernel.mu_w();
  result.tau_2 = kernel.tau_2();

  h5::AtomicFile out;
  ECHO_TRY(out.create(out_path));
  H5::DataSet net_error, injected_error, partial_sum_norm, injected_norm, outputs;
  H5::DataSet correction_norm, sigma_ds, relative_deviation;
  try {
    H5::H5File& f = out.file();
    net_error = h5::create_dataset(f, "/net_error", H5::PredType::IEEE_F64LE,
                                   {info.passes, info.sites, n}, {1, 1, n}, 0);
    injected_error = h5::create_dataset(f, "/injected_error", H5::PredType::IEEE_F64LE,
                                        {info.passes, info.sites, n}, {1, 1, n}, 0);
    partial_sum_norm = h5::create_dataset(f, "/partial_sum_norm", H5::PredType::IEEE_F64LE,
                                          {info.passes, info.sites}, {1, info.sites}, 0);
    injected_norm = h5::create_dataset(f, "/injected_norm", H5::PredType::IEEE_F64LE,
                                       {info.passes, info.sites}, {1, info.sites}, 0);
    correction_norm = h5::create_dataset(f, "/correction_norm", H5::PredType::IEEE_F64LE,
                                         {info.passes, info.sites}, {1, info.sites}, 0);
    if (info.has_hidden_states) {
      sigma_ds = h5::create_dataset(f, "/sigma", H5::PredType::IEEE_F64LE,
                                    {info.passes, info.sites + 1}, {1, info.sites + 1}, 0);
      relative_deviation = h5::create_dataset(f, "/relative_deviation", H5::PredType::IEEE_F64LE,
                                              {info.passes, info.sites}, {1, info.sites}, 0);
    }
    // The kernel's tails T_m and coefficients phi_m for m < N, next to the measured sums.
    std::vector<double> tails(info.sites), phis(info.sites);
    for (std::size_t m = 0; m < info.sites; ++m) {
      tails[m] = kernel.tail(m);
      phis[m] = kernel.phi(m);
    }
    H5::DataSet tail_ds = h5::create_dataset(f, "/tail", H5::PredType::IEEE_F64LE, {info.sites}, {info.sites}, 0);
    h5::write_block(tail_ds, {0}, {info.sites}, H5::PredType::NATIVE_DOUBLE, tails.data());
    H5::DataSet phi_ds = h5::create_dataset(f, "/phi", H5::PredType::IEEE_F64LE, {info.sites}, {info.sites}, 0);
    h5::write_block(phi_ds, {0}, {info.sites}, H5::PredType::NATIVE_DOUBLE, phis.data());
    if (options.save_outputs) {
      outputs = h5::create_dataset(f, "/outputs", H5::PredType::IEEE_F32LE,
                                   {info.passes, info.sites, ranks, n}, {1, 1, 1, n}, 0);
    }
    write_config_attributes(f, spec, trace.path(), backend.name());
  } catch (const H5::Exception& e) {
    return Status(StatusCode::kIoError, out_path + ": cannot create datasets (" + e.getDetailMsg() + ")");
  }

  ECHO_TRY(check_trace_sites(info, trace.path(), spec));
  const std::vector<SiteInfo> site_info = trace_sites(info);
  SiteBuffers buf(ranks, n);
  std::vector<double> delta(n), rho(n), partial(n);
  std::vector<double> partial_norms(info.sites), injected_norms(info.sites);
  std::vector<double> correction_norms(info.sites), relative(info.sites);
  std::vector<double> sigmas(info.sites + 1);
  std::vector<float> hidden(info.has_hidden_states ? (info.sites + 1) * n : 0);
  double injected_total = 0.0, relative_total = 0.0, final_total = 0.0;
  double correction_total = 0.0, partial_sq_total = 0.0;
  result.max_relative_deviation = info.has_hidden_states ? 0.0 : std::nan("");

  for (std::size_t pass = 0; pass < info.passes; ++pass) {
    backend.start_pass();
    std::fill(partial.begin(), partial.end(), 0.0);
    if (info.has_hidden_states) {
      ECHO_TRY(trace.read_hidden_states(pass, hidden.data()));
      // sigma_k = ||z_k|| / sqrt(n), the root-mean-square entry of hidden state k.
      for (std::size_t k = 0; k <= info.sites; ++k) {
        double sq = 0.0;
        for (std::size_t i = 0; i < n; ++i) sq += static_cast<double>(hidden[k * n + i]) * hidden[k * n + i];
        sigmas[k] = std::sqrt(sq / static_cast<double>(n));
      }
    }
    for (std::size_t site = 0; site < info.sites; ++site) {
      ECHO_TRY(trace.read_site(pass, site, buf.x.data()));
      if (!options.allow_nonfinite) {
        if (Status s = trace.find_nonfinite(pass, site, buf.x.data(), spec.dtype); !s.ok()) {
          return Status(s.code(), s.message() + " (use --allow-nonfinite to replay it anyway)");
        }
      }
      round_to_dtype(buf.x.data(), buf.x.size(), spec.dtype);
      AllReduceReport report;
      const auto t0 = std::chrono::steady_clock::now();
      if (Status s = backend.run(n, buf.in.data(), buf.out.data(), buf.compensated.data(), &report,
                                 site_info.empty() ? nullptr : &site_info[site]);
          !s.ok()) {
        return Status(s.code(), "pass " + std::to_string(pass) + ", site " + std::to_string(site) +
                                    ": " + s.message());
      }
      result.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      result.poisoned_groups += report.poisoned_groups;
      result.exact_path_sites += report.exact_path ? 1 : 0;

      // delta = y - sum_i x'_i and rho = y - sum_i x_i, from rank 0's output, ranks in order.
      double sum_norm_sq = 0.0, correction_sq = 0.0;
      for (std::size_t i = 0; i < n; ++i) {
        const double sx = rank_sum(buf.x.data(), ranks, n, i);
        const double sxp = rank_sum(buf.xp.data(), ranks, n, i);
        const double yi = static_cast<double>(buf.y[i]);
        delta[i] = yi - sxp;
        rho[i] = yi - sx;
        partial[i] += rho[i];
        sum_norm_sq += sx * sx;
        correction_sq += (sxp - sx) * (sxp - sx);
      }
      correction_norms[site] = std::sqrt(correction_sq);
      correction_total += correction_norms[site];
      const double dn = norm2(delta);
      const double pn = norm2(partial);
      injected_norms[site] = dn;
      partial_norms[site] = pn;
      partial_sq_total += pn * pn;
      if (info.has_hidden_states) {
        // S_t perturbs the hidden state after site t, z_{t+1}.
        const double scale = std::sqrt(static_cast<double>(n)) * sigmas[site + 1];
        relative[site] = scale > 0.0 ? pn / scale : 0.0;
        result.max_relative_deviation = std::max(result.max_relative_deviation, relative[site]);
      }
      result.q = std::max(result.q, dn);
      result.max_partial_sum = std::max(result.max_partial_sum, pn);
      injected_total += dn;
      relative_total += sum_norm_sq > 0.0 ? norm2(rho) / std::sqrt(sum_norm_sq) : 0.0;
      try {
        h5::write_block(net_error, {pass, site, 0}, {1, 1, n}, H5::PredType::NATIVE_DOUBLE, rho.data());
        h5::write_block(injected_error, {pass, site, 0}, {1, 1, n}, H5::PredType::NATIVE_DOUBLE, delta.data());
        if (options.save_outputs) {
          h5::write_block(outputs, {pass, site, 0, 0}, {1, 1, ranks, n}, H5::PredType::NATIVE_FLOAT, buf.y.data());
        }
      } catch (const H5::Exception& e) {
        return Status(StatusCode::kIoError, out_path + ": write failed (" + e.getDetailMsg() + ")");
      }
      if (options.on_site) options.on_site(pass, site);
    }
    final_total += partial_norms.back();
    try {
      h5::write_block(partial_sum_norm, {pass, 0}, {1, info.sites}, H5::PredType::NATIVE_DOUBLE, partial_norms.data());
      h5::write_block(injected_norm, {pass, 0}, {1, info.sites}, H5::PredType::NATIVE_DOUBLE, injected_norms.data());
      h5::write_block(correction_norm, {pass, 0}, {1, info.sites}, H5::PredType::NATIVE_DOUBLE, correction_norms.data());
      if (info.has_hidden_states) {
        h5::write_block(sigma_ds, {pass, 0}, {1, info.sites + 1}, H5::PredType::NATIVE_DOUBLE, sigmas.data());
        h5::write_block(relative_deviation, {pass, 0}, {1, info.sites}, H5::PredType::NATIVE_DOUBLE, relative.data());
      }
    } catch (const H5::Exception& e) {
      return Status(StatusCode::kIoError, out_path + ": write failed (" + e.getDetailMsg() + ")");
    }
  }

  const double calls = static_cast<double>(info.passes * info.sites);
  result.mean_injected_norm = injected_total / calls;
  result.relative_output_error = relative_total / calls;
  result.final_partial_sum = final_total / static_cast<double>(info.passes);
  result.bound = kernel.partial_sum_bound(info.sites, result.q);
  result.mean_correction_norm = correction_total / calls;
  result.rms_partial_sum = std::sqrt(partial_sq_total / calls);
  result.remark1_bound = info.sites > 0 ? result.q * std::sqrt(kernel.phi_square_sum(info.sites - 1)) : 0.0;
  result.theorem1_bound = (1.0 + result.mu_w) * result.q;
  try {
    H5::H5File& f = out.file();
    h5::write_double_attribute(f, "q", result.q);
    h5::write_double_attribute(f, "mu_w", result.mu_w);
    h5::write_double_attribute(f, "tau_2", result.tau_2);
    h5::write_double_attribute(f, "max_partial_sum", result.max_partial_sum);
    h5::write_double_attribute(f, "bound", result.bound);
    h5::write_double_attribute(f, "remark1_bound", result.remark1_bound);
    h5::write_double_attribute(f, "theorem1_bound", result.theorem1_bound);
    h5::write_double_attribute(f, "rms_partial_sum", result.rms_partial_sum);
    h5::write_double_attribute(f, "mean_correction_norm", result.mean_correction_norm);
    if (info.has_hidden_states) {
      h5::write_double_attribute(f, "max_relative_deviation", result.max_relative_deviation);
    }
    h5::write_int_attribute(f, "poisoned_groups", static_cast<std::int64_t>(result.poisoned_groups));
  } catch (const H5::Exception& e) {
    return Status(StatusCode::kIoError, out_path + ": cannot write attributes (" + e.getDetailMsg() + ")");
  }
  net_error = H5::DataSet();
  injected_error = H5::DataSet();
  partial_sum_norm = H5::DataSet();
  injected_norm = H5::DataSet();
  outputs = H5::DataSet();
  correction_norm = H5::DataSet();
  sigma_ds = H5::DataSet();
  relative_deviation = H5::DataSet();
  ECHO_TRY(out.commit());
  if (summary != nullptr) *summary = result;
  return Status::Ok();
}

}  // namespace echo
