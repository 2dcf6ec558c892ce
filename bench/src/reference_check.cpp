#include "reference_check.h"

#include <string>

#include "echo/numerics/dtype_rounding.h"

namespace echo::bench {

Status reference_result(const AllReduceSpec& spec, const std::vector<std::vector<std::uint16_t>>& inputs, int calls,
                        std::vector<std::uint16_t>* expected) {
  const int ranks = static_cast<int>(inputs.size());
  if (ranks < 1 || ranks > kMaxRanks || calls < 1) {
    return Status(StatusCode::kInvalidArgument, "reference check: " + std::to_string(ranks) + " ranks, " +
                                                    std::to_string(calls) + " calls");
  }
  const std::size_t count = inputs[0].size();
  std::vector<std::vector<float>> in(ranks, std::vector<float>(count)), out(ranks, std::vector<float>(count));
  std::vector<const float*> in_ptrs(ranks);
  std::vector<float*> out_ptrs(ranks);
  for (int r = 0; r < ranks; ++r) {
    if (inputs[r].size() != count) {
      return Status(StatusCode::kInvalidArgument, "reference check: rank " + std::to_string(r) + " has " +
                                                      std::to_string(inputs[r].size()) + " elements, rank 0 " +
                                                      std::to_string(count));
    }
    for (std::size_t i = 0; i < count; ++i) in[r][i] = numerics::bf16_bits_to_float(inputs[r][i]);
    in_ptrs[r] = in[r].data();
    out_ptrs[r] = out[r].data();
  }
  std::vector<CompensatorState> states(ranks);
  const bool compensated = spec.compensator.mode != CompensatorMode::kOff;
  for (int k = 0; k < calls; ++k) {
    AllReduceReport report;
    ECHO_TRY(allreduce(spec, ranks, count, in_ptrs.data(), out_ptrs.data(), compensated ? states.data() : nullptr, nullptr, &report));
  }
  expected->resize(count);
  // The outputs are bf16 values held in float: the conversion is exact.
  for (std::size_t i = 0; i < count; ++i) (*expected)[i] = numerics::float_to_bf16_bits(out[0][i]);
  return Status::Ok();
}

unsigned long long count_wrong(const std::vector<std::uint16_t>& expected,
                               const std::vector<std::vector<std::uint16_t>>& outputs) {
  unsigned long long wrong = 0;
  for (const auto& o : outputs) {
    for (std::size_t i = 0; i < expected.size(); ++i) wrong += i >= o.size() || o[i] != expected[i];
  }
  return wrong;
}

}  // namespace echo::bench
