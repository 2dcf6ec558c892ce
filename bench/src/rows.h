// The benchmark's rows: what each one calls and how it is timed (docs/bench.md says why each is
// there).
#pragma once

#include <string>
#include <vector>

#include "echo/allreduce.h"
#include "echo/bench/harness.h"
#include "echo/cuda/communicator.h"

namespace echo::bench {

enum class RowCall {
  kNcclAllReduce,  // NCCL's own bf16 all-reduce (the baseline of the speedup column)
  kEcho,           // the Echo all-reduce over the row's transport
};

struct RowSpec {
  std::string name;
  RowCall call = RowCall::kEcho;
  int bits = 4;
  cuda::Transport transport = cuda::Transport::kPeerToPeer;
  CompensatorMode mode = CompensatorMode::kOff;
  ResidualMode residual = ResidualMode::kGlobal;
  DType state_dtype = DType::kFloat32;
  bool with_matmul = false;  // timed as matmul + all-reduce minus the matmul alone (paper Sec. 6)
  long long exact_max = -1;  // the row's exact-path limit; -1: --exact-max-count or the library default

  bool compensated() const { return mode != CompensatorMode::kOff; }
};

// Every row, in the order they run.
const std::vector<RowSpec>& all_rows();

// The rows --rows and --graph select; kInvalidArgument for a name that is no row or a matmul row
// asked for with --graph (the matmul is not captured into graphs).
Status select_rows(const Options& options, std::vector<RowSpec>* rows);

// The Echo call of `row` at P ranks (exact-path limit: the row's, else --exact-max-count, else
// the library default).
AllReduceSpec echo_spec(const RowSpec& row, const Options& options, int ranks);

}  // namespace echo::bench
