#include "verify.h"

#include <cmath>
#include <string>

#include "echo/bench/device_ops.h"
#include "reference_check.h"

namespace echo::bench {
namespace {

// What decides a bench call's result beyond its inputs (the rest of the spec is the same in every
// row): rows with equal keys share the reference's computation.
std::string call_key(const AllReduceSpec& spec) {
  return std::to_string(spec.quant.bits) + "/" + compensator_mode_name(spec.compensator.mode) + "/" +
         residual_mode_name(spec.compensator.residual) + "/" + dtype_name(spec.compensator.state_dtype) + "/" +
         std::to_string(spec.exact_max_count);
}

}  // namespace

Status prepare_inputs(Context& c, std::size_t count) {
  for (int r = 0; r < c.P; ++r) {
    ECHO_BENCH_CUDA(cudaSetDevice(c.devs[r]), "cudaSetDevice");
    ECHO_TRY(fill_random(c.ranks[r].in.get(), count, DType::kBFloat16, 1234 + r, nullptr));
    ECHO_BENCH_CUDA(cudaDeviceSynchronize(), "fill");
  }
  c.host_inputs.clear();
  c.expected.clear();
  if (c.opt.skip_verify) return Status::Ok();
  ECHO_BENCH_CUDA(cudaSetDevice(c.devs[0]), "cudaSetDevice");
  for (int r = 0; r < c.P; ++r) {
    const void* src = c.ranks[r].in.get();
    if (r != 0) {
      ECHO_BENCH_CUDA(cudaMemcpyPeer(c.scratch.get(), c.devs[0], src, c.devs[r], count * 2), "copy");
      src = c.scratch.get();
    }
    ECHO_TRY(accumulate_fp64(c.ref.as<double>(), src, count, DType::kBFloat16, r == 0, nullptr));
  }
  ECHO_BENCH_CUDA(cudaDeviceSynchronize(), "reference");
  if (count > kReferenceMaxCount) return Status::Ok();
  c.host_inputs.assign(c.P, std::vector<std::uint16_t>(count));
  for (int r = 0; r < c.P; ++r) {
    ECHO_BENCH_CUDA(cudaMemcpy(c.host_inputs[r].data(), c.ranks[r].in.get(), count * 2, cudaMemcpyDeviceToHost),
                    "copy of rank " + std::to_string(r) + "'s input");
  }
  return Status::Ok();
}

Status compare_outputs(const Context& c, std::size_t count, Verification* v) {
  ECHO_BENCH_CUDA(cudaSetDevice(c.devs[0]), "cudaSetDevice");
  ECHO_BENCH_CUDA(cudaMemset(c.sums.get(), 0, 2 * sizeof(double)), "memset");
  ECHO_TRY(error_norms(c.ref.as<double>(), c.ranks[0].out.get(), count, DType::kBFloat16, c.sums.as<double>(),
                             nullptr));
  v->differ = 0;
  for (int r = 1; r < c.P; ++r) {
    ECHO_BENCH_CUDA(cudaMemset(c.mismatches.get(), 0, sizeof(unsigned long long)), "memset");
    ECHO_BENCH_CUDA(cudaMemcpyPeer(c.scratch.get(), c.devs[0], c.ranks[r].out.get(), c.devs[r], count * 2), "copy");
    ECHO_TRY(count_mismatches(c.ranks[0].out.get(), c.scratch.get(), count * 2,
                                    c.mismatches.as<unsigned long long>(), nullptr));
    unsigned long long mismatches = 0;
    ECHO_BENCH_CUDA(cudaMemcpy(&mismatches, c.mismatches.get(), sizeof(mismatches), cudaMemcpyDeviceToHost), "copy");
    v->differ += mismatches != 0;
  }
  double sums[2];
  ECHO_BENCH_CUDA(cudaMemcpy(sums, c.sums.get(), sizeof(sums), cudaMemcpyDeviceToHost), "copy");
  v->rel_error = sums[1] > 0 ? std::sqrt(sums[0] / sums[1]) : 0.0;
  return Status::Ok();
}

Status check_against_reference(Context& c, const RowSpec& row, std::size_t count, const RankCall& call,
                               Verification* v) {
  v->wrong.reset();
  if (row.call != RowCall::kEcho || count > kReferenceMaxCount || c.host_inputs.empty()) return Status::Ok();
  const cuda::Transport t = row.transport;
  ECHO_TRY(on_every_rank(c.P, [&](int r) -> Status {
    ECHO_BENCH_CUDA(cudaSetDevice(c.devs[r]), "cudaSetDevice");
    if (row.compensated()) ECHO_TRY(cuda::reset_compensator(c.ranks[r].state.get(), c.stream(r)));
    for (int k = 0; k < kCheckCalls; ++k) ECHO_TRY(call(r));
    ECHO_TRY(cuda::join(c.comm(r, t), c.stream(r)));
    ECHO_BENCH_CUDA(cudaStreamSynchronize(c.stream(r)), "reference check calls");
    return cuda::synchronize(c.comm(r, t), nullptr);
  }));
  std::vector<std::vector<std::uint16_t>> outputs(c.P, std::vector<std::uint16_t>(count));
  for (int r = 0; r < c.P; ++r) {
    ECHO_BENCH_CUDA(cudaSetDevice(c.devs[r]), "cudaSetDevice");
    ECHO_BENCH_CUDA(cudaMemcpy(outputs[r].data(), c.ranks[r].out.get(), count * 2, cudaMemcpyDeviceToHost),
                    "copy of rank " + std::to_string(r) + "'s output");
  }
  const AllReduceSpec spec = echo_spec(row, c.opt, c.P);
  const std::string key = call_key(spec);
  if (c.expected.count(key) == 0) {
    ECHO_TRY(reference_result(spec, c.host_inputs, kCheckCalls, &c.expected[key]));
  }
  v->wrong = count_wrong(c.expected[key], outputs);
  return Status::Ok();
}

}  // namespace echo::bench
