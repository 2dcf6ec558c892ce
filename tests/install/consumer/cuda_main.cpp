// Builds against Echo::cuda from an installed tree: its public headers need no NCCL headers
// (check_install.sh also checks that none includes <nccl.h>). Runs no GPU work.
#include <cstdio>

#include "echo/cuda/communicator.h"

int main() {
  echo::AllReduceSpec spec;
  spec.quant.bits = 3;  // the kernels do 4 and 8 bits
  const echo::Status s = echo::cuda::can_implement(spec, 2, echo::cuda::CommOptions{});
  if (s.code() != echo::StatusCode::kUnsupported) {
    std::fprintf(stderr, "unexpected status: %s\n", s.message().c_str());
    return 1;
  }
  std::printf("cuda consumer ok\n");
  return 0;
}
