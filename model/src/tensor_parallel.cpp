#include "echo/model/tensor_parallel.h"

#include <algorithm>
#include <string>

#include "echo/site.h"

namespace echo::model {

const char* reduce_mode_name(ReduceMode mode) {
  return mode == ReduceMode::kExact ? "exact" : "echo";
}

Status TensorParallelSpec::validate() const {
  if (ranks < 1 || ranks > kMaxRanks) {
    return Status(StatusCode::kInvalidArgument,
                  "ranks must lie in [1, " + std::to_string(kMaxRanks) + "], got " +
                      std::to_string(ranks));
  }
  if (mode == ReduceMode::kEcho) {
    for (int site : eight_bit_sites) {
      if (site < 0) {
        return Status(StatusCode::kInvalidArgument,
                      "eight-bit sites must be site indices >= 0, got " + std::to_string(site));
      }
    }
    AllReduceSpec effective = allreduce;
    effective.dtype = dtype;
    effective.quant.bits = eight_bit_sites.empty() ? allreduce.quant.bits : 8;
    if (Status s = effective.validate(ranks); !s.ok()) return s;
    effective.quant.bits = allreduce.quant.bits;
    return effective.validate(ranks);
  }
  return Status::Ok();
}

AllReduceSpec TensorParallelSpec::site_spec(int site) const {
  AllReduceSpec spec = allreduce;
  spec.dtype = dtype;
  if (std::find(eight_bit_sites.begin(), eight_bit_sites.end(), site) != eight_bit_sites.end()) {
    spec.quant.bits = 8;
  }
  return spec;
}

double TensorParallelSpec::wire_bits_per_element(int sites) const {
  if (mode == ReduceMode::kExact || sites <= 0) return 8.0 * static_cast<double>(dtype_size(dtype));
  double total = 0.0;
  for (int site = 0; site < sites; ++site) total += site_spec(site).quant.wire_bits_per_element();
  return total / sites;
}

std::size_t slice_begin(std::size_t in_features, int ranks, int rank) {
  return in_features * static_cast<std::size_t>(rank) / static_cast<std::size_t>(ranks);
}

Status TensorParallel::configure(const TensorParallelSpec& spec) {
  Status status = spec.validate();
  if (!status.ok()) return status;
  spec_ = spec;
  spec_.allreduce.dtype = spec.dtype;
  states_.assign(static_cast<std::size_t>(spec.ranks), CompensatorState{});
  partials_.assign(static_cast<std::size_t>(spec.ranks), Matrix{});
  poisoned_groups_ = 0;
  return Status::Ok();
}

void TensorParallel::begin_pass() {
  for (CompensatorState& state : states_) state.reset();
}

Status TensorParallel::reduce(int site, SiteKind kind, const Matrix& input, const Matrix& weight,
                              Matrix* out, SiteObserver* observer) {
  const int ranks = spec_.ranks;
  if (ranks < 1 || static_cast<int>(partials_.size()) != ranks) {
    return Status(StatusCode::kInvalidArgument, "tensor parallel: not configured");
  }
  const auto in_features = static_cast<std::size_t>(input.cols());
  if (weight.cols() != input.cols() || in_features < static_cast<std::size_t>(ranks)) {
    return Status(StatusCode::kInvalidArgument,
                  "tensor parallel: site " + std::to_string(site) + " has " +
                      std::to_string(in_features) + " input features for " +
                      std::to_string(ranks) + " ranks");
  }
  const auto count = static_cast<std::size_t>(input.rows() * weight.rows());
  const float* inputs[kMaxRanks];
  float* outputs[kMaxRanks];
  for (int r = 0; r < ranks; ++r) {
    const auto begin = static_cast<Eigen::Index>(slice_begin(in_features, ranks, r));
    const auto end = static_cast<Eigen::Index>(slice_begin(in_features, ranks, r + 1));
    Matrix& partial = partials_[static_cast<std::size_t>(r)];
    partial.noalias() = input.middleCols(begin, end - begin) *
                        weight.middleCols(begin, end - begin).transpose();
    // Each rank's GEMM writes its output in the serving dtype.
    round_to_dtype(partial.data(), count, spec_.dtype);
    inputs[r] = partial.data();
    outputs[r] = partial.data();
  }
  if (observer != nullptr) observer->on_site(site, kind, ranks, count, inputs);

  out->resize(input.rows(), weight.rows());
  if (spec_.mode == ReduceMode::kExact) {
    exact_allreduce(spec_.dtype, ranks, count, inputs, out->data());
    return Status::Ok();
  }
  AllReduceReport report;
  // SmolLM2's sites join the residual stream as they are: no post-norm (stream units' gains 1).
  const SiteInfo pre_norm;
  Status status = allreduce_at_site(pre_norm, spec_.eight_bit_sites.empty() ? spec_.allreduce : spec_.site_spec(site),
                                    ranks, count, inputs, outputs, states_.data(), nullptr, &report, &workspace_);
  if (!status.ok()) {
    return Status(status.code(), "all-reduce at site " + std::to_string(site) + ": " +
                                     status.message());
  }
  poisoned_groups_ += report.poisoned_groups;
  // Every rank holds the same result; rank 0's copy continues the pass.
  *out = partials_[0];
  return Status::Ok();
}

}  // namespace echo::model
