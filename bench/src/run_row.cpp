#include "run_row.h"

#include <nccl.h>

#include <algorithm>
#include <string>

#include "timing.h"
#include "verify.h"

namespace echo::bench {

int matmul_rows(const Options& opt, std::size_t count) {
  if (opt.mm_m > 0) return opt.mm_m;
  const std::size_t tokens = count / static_cast<std::size_t>(opt.mm_k);
  return static_cast<int>(std::clamp<std::size_t>(tokens, 1, kMatmulMaxRows));
}

Status time_matmul(const Context& c, int warmup, int iters, int rows, double* ms) {
  std::vector<double> t;
  ECHO_TRY(time_loop(
      c, warmup, iters, [&](int r) { return c.ranks[r].matmul->run(c.stream(r), rows); }, &t));
  *ms = median(t);
  return Status::Ok();
}

Status run_row(Context& c, const RowSpec& row, std::size_t count, Measured* m) {
  const int mm_rows = matmul_rows(c.opt, count);
  const AllReduceSpec spec = echo_spec(row, c.opt, c.P);
  RankCall op, close, echo_call;
  if (row.call == RowCall::kNcclAllReduce) {
    op = [&](int r) -> Status {
      const ncclResult_t e = ncclAllReduce(c.ranks[r].in.get(), c.ranks[r].out.get(), count, ncclBfloat16, ncclSum,
                                           c.ranks[r].nccl.get(), c.stream(r));
      if (e == ncclSuccess) return Status::Ok();
      return Status(StatusCode::kDeviceError, std::string("ncclAllReduce: ") + ncclGetErrorString(e));
    };
  } else {
    if (row.compensated()) {
      for (int r = 0; r < c.P; ++r) {
        ECHO_BENCH_CUDA(cudaSetDevice(c.devs[r]), "cudaSetDevice");
        ECHO_TRY(cuda::reset_compensator(c.ranks[r].state.get(), c.stream(r)));
      }
    }
    echo_call = [&](int r) {
      return cuda::allreduce(c.comm(r, row.transport), c.ranks[r].in.get(), c.ranks[r].out.get(), count, spec,
                             row.compensated() ? c.ranks[r].state.get() : nullptr, c.stream(r));
    };
    op = [&](int r) -> Status {
      ECHO_TRY(echo_call(r));
      if (row.with_matmul) return c.ranks[r].matmul->run(c.stream(r), mm_rows);
      return Status::Ok();
    };
    // A graph's capture ends with the side-stream update of its last call joined back.
    close = [&](int r) { return cuda::join(c.comm(r, row.transport), c.stream(r)); };
  }
  std::vector<double> t;
  ECHO_TRY(time_loop(c, c.opt.warmup, c.opt.iters, op, &t, c.opt.graph, close));
  m->ms = median(t);
  if (row.with_matmul) {
    // The matmul alone, measured right after the row with the same iterations: its time drifts
    // over a run (clocks under sustained load), so a single early measurement would bias the
    // difference by a few hundred microseconds.
    double matmul_ms = 0;
    ECHO_TRY(time_matmul(c, c.opt.warmup, c.opt.iters, mm_rows, &matmul_ms));
    m->ms -= matmul_ms;
  }
  if (row.call == RowCall::kEcho) {
    for (int r = 0; r < c.P; ++r) ECHO_TRY(cuda::synchronize(c.comm(r, row.transport), nullptr));
  }
  if (c.opt.skip_verify) return Status::Ok();
  ECHO_TRY(compare_outputs(c, count, &m->v));
  return check_against_reference(c, row, count, echo_call, &m->v);
}

}  // namespace echo::bench
