#include "echo/model/tensor_parallel.h"

#include <string>

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
    AllReduceSpec effective = allreduce;
    effective.dtype = dtype;
    return effective.validate(ranks);
  }
  return Status::Ok();
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
  Status status = allreduce(spec_.allreduce, ranks, count, inputs, outputs, states_.data(),
                            nullptr, &report);
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
